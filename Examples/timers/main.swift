// Listings 3-10 and 3-11 of the guide: a timer with an initial delay on a 0.1 s grid, a
// scheduled 0.2 s timer, a timer in the common modes, and a late timer showing the
// missed-fire rule (fire once for the missed period, then stay on the grid).
import Foundation
import RunLoopKit

/// Records when a timer fired, and checks it never fires before its scheduled date.
final class FireLog {
    var scheduled: [Deadline] = []
    var fired: [Deadline] = []
    func record(_ timer: LoopTimer) {
        scheduled.append(timer.fireDate)
        fired.append(.now())
    }
    var neverEarly: Bool { zip(fired, scheduled).allSatisfy { $0 >= $1 } }
}

/// Runs the timers of Listings 3-10 and 3-11 for about 1.3 s and checks how they fired.
func demonstrateTimers() -> Bool {
    let loop = ThreadRunLoop.current
    var failures: [String] = []
    func check(_ condition: Bool, _ what: String) {
        print("\(condition ? "ok  " : "FAIL") \(what)")
        if !condition { failures.append(what) }
    }

    // Listing 3-10, first timer: starts 0.3 s from now, then every 0.1 s.
    let first = FireLog()
    let start = Deadline.now()
    let gridTimer = LoopTimer(fireAt: start + .milliseconds(300), interval: .milliseconds(100)) { first.record($0) }
    loop.add(gridTimer, to: .default)

    // Listing 3-10, second timer: the "scheduled" form, every 0.2 s from now.
    let second = FireLog()
    let scheduledTimer = LoopTimer(after: .milliseconds(200), repeating: .milliseconds(200)) { second.record($0) }
    loop.add(scheduledTimer, to: .default)

    // Listing 3-11: a timer first firing 0.1 s from now, every 0.3 s, in the common modes.
    let common = FireLog()
    let commonTimer = LoopTimer(after: .milliseconds(100), repeating: .milliseconds(300), tolerance: .milliseconds(5)) {
        common.record($0)
    }
    loop.addCommonMode("tracking")
    loop.add(commonTimer, to: .common)

    // A late timer: every 50 ms, but its first callback keeps the thread busy for 175 ms.
    let late = FireLog()
    let lateOrigin = Deadline.now() + .milliseconds(50)
    let lateTimer = LoopTimer(fireAt: lateOrigin, interval: .milliseconds(50)) { timer in
        late.record(timer)
        if late.fired.count == 1 {
            let busyUntil = Deadline.now() + .milliseconds(175)
            while Deadline.now() < busyUntil {} // a long handler, on purpose
        }
    }
    loop.add(lateTimer, to: .default)

    loop.run(until: start + .milliseconds(1_000))
    _ = loop.run(mode: "tracking", timeout: .milliseconds(350), returnAfterSourceHandled: false)
    let commonFiresInDefault = common.fired.filter { $0 < start + .milliseconds(1_000) }.count

    print("grid timer fired \(first.fired.count) times, scheduled timer \(second.fired.count), "
        + "common timer \(common.fired.count), late timer \(late.fired.count)")
    check(first.neverEarly && second.neverEarly && common.neverEarly && late.neverEarly, "no timer fired early")
    check(first.scheduled.first == start + .milliseconds(300), "the first timer waited for its initial delay")
    check(first.scheduled.allSatisfy { ($0 - start - .milliseconds(300)).totalNanosecondsValue % 100_000_000 == 0 },
          "the first timer stayed on its 0.1 s grid")
    check((3...5).contains(second.fired.count), "the scheduled 0.2 s timer fired about 4 times in 1 s")
    check(commonFiresInDefault >= 3 && common.fired.count > commonFiresInDefault,
          "the common-modes timer fired in the default mode and in the added common mode 'tracking'")
    let lateGaps = zip(late.scheduled.dropFirst(), late.scheduled).map { ($0 - $1).totalNanosecondsValue / 1_000_000 }
    print("late timer's scheduled dates, ms after its origin: "
        + late.scheduled.map { "\(($0 - lateOrigin).totalNanosecondsValue / 1_000_000)" }.joined(separator: " "))
    check(late.scheduled.count >= 3 && lateGaps.first.map { $0 >= 150 } == true,
          "after the 175 ms stall the late timer fired once for the missed period (no burst of catch-up fires)")
    check(late.scheduled.allSatisfy { ($0 - lateOrigin).totalNanosecondsValue % 50_000_000 == 0 },
          "and stayed on its 50 ms grid")

    for timer in [gridTimer, scheduledTimer, commonTimer, lateTimer] { timer.invalidate() }
    return failures.isEmpty
}

exit(demonstrateTimers() ? 0 : 1)

extension Duration {
    var totalNanosecondsValue: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
}
