import CLinuxPoll
import Glibc
import LatencyStatistics
import RunLoopKit

/// The lateness of each fire of a repeating timer after its grid point, on the monotonic
/// clock. A fire that missed grid points is late from the first one it missed (the timer
/// fires once for them and continues on its grid, in both RunLoopKit and Core Foundation).
struct LatenessTracker {
    let interval: UInt64
    private(set) var fires = 0
    private(set) var early = 0
    private(set) var recorder = LatencyHistogram()
    /// The grid point the next fire is due at (0 before the first fire).
    private(set) var expected: UInt64 = 0

    init(interval: UInt64) { self.interval = interval }

    mutating func fired(at now: UInt64, firstGridPoint: UInt64) {
        if expected == 0 { expected = firstGridPoint }
        if now >= expected {
            recorder.record(nanoseconds: now - expected)
        } else {
            early += 1
            recorder.record(nanoseconds: 0)
        }
        fires += 1
        let reference = max(now, expected)
        expected = firstGridPoint + ((reference - firstGridPoint) / interval + 1) * interval
    }
}

/// A 1 ms repeating `LoopTimer` (no tolerance) on a thread running its RunLoopKit loop.
final class RunLoopKitTimerLateness: LatencyContender {
    let name = "runloopkit"
    private let driver = CommandThread(cpu: nil)

    func measure(_ count: Int) -> LatencyHistogram {
        driver.run {
            let loop = ThreadRunLoop.current
            let tracker = Confined(LatenessTracker(interval: 1_000_000))
            let first = Clock.now() + 1_000_000
            let timer = LoopTimer(fireAt: Deadline(rawValue: first), interval: .milliseconds(1)) { timer in
                tracker.value.fired(at: Clock.now(), firstGridPoint: first)
                if tracker.value.fires >= count { timer.invalidate() }
            }
            loop.add(timer, to: .default)
            while timer.isValid { _ = loop.run(mode: .default, timeout: .seconds(1), returnAfterSourceHandled: false) }
            return tracker.value.recorder
        }
    }

    func finish() { driver.finish() }
}

/// The floor of a 1 ms timer: a thread asleep in `clock_nanosleep(CLOCK_MONOTONIC,
/// TIMER_ABSTIME)` until each grid point, measured as the loops' timers are (a wake-up
/// that missed grid points sleeps until the next one). Its timer slack is a loop thread's,
/// 1 µs (RunLoopKit sets it on every loop thread; the kernel's default is 50 µs).
final class FloorTimerLateness: LatencyContender {
    let name = "floor"
    private let driver = CommandThread(cpu: nil)

    init() {
        driver.run { _ = clinux_set_timer_slack(1_000) }
    }

    func measure(_ count: Int) -> LatencyHistogram {
        driver.run {
            var tracker = LatenessTracker(interval: 1_000_000)
            let first = Clock.now() + 1_000_000
            var due = first
            while tracker.fires < count {
                var deadline = timespec(tv_sec: Int(due / 1_000_000_000), tv_nsec: Int(due % 1_000_000_000))
                while true {
                    let rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nil)
                    if rc == 0 { break }
                    guard rc == EINTR else { fatalError("clock_nanosleep: \(rc)") }
                }
                tracker.fired(at: Clock.now(), firstGridPoint: first)
                due = tracker.expected
            }
            return tracker.recorder
        }
    }

    func finish() { driver.finish() }
}

enum TimerLatenessCase {
    static let name = "timer-lateness"

    static func run(_ config: BenchConfig) -> CaseOutcome {
        let distributions = Harness.latencies([RunLoopKitTimerLateness(), FoundationTimerLateness(), FloorTimerLateness()],
                                              rounds: config.timerRounds, batch: config.timerFires, warmUp: 100,
                                              only: config.only)
        var outcome = CaseOutcome(name: name, distributions: distributions, chartCaption: "lateness of a 1 ms repeating timer")
        outcome.metrics = [
            distributions.metric(name, "us_p50") { $0.p50 },
            distributions.metric(name, "us_p99", targets: [.atMostTimes(1, peer: "foundation-timer"),
                                                           .atMostTimes(1.1, peer: "floor")]) { $0.p99 },
            distributions.metric(name, "us_max") { $0.max },
        ]
        let seconds = Double(config.timerRounds * config.timerFires) / 1000
        outcome.notes = ["\(name): \(Format.value(seconds)) s of fires per timer, in \(config.timerRounds) interleaved rounds; "
                         + "the 1000 µs bound of issue 6 is the virtual machine's (p99 now only information)"]
        return outcome
    }
}
