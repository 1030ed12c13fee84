import Dispatch
@testable import RunLoopCore
import RunLoopSystem
import RunLoopTestSupport
import XCTest

final class LoopTimerTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    func testAddingATimerNeverFiresItEvenWhenItsDateHasPassed() {
        var fired = 0
        let timer = LoopTimer(fireAt: .now() + .seconds(-1)) { _ in fired += 1 }
        loop.add(timer, to: "add-no-fire")
        XCTAssertEqual(fired, 0, "adding does not fire")
        XCTAssertEqual(loop.run(mode: "add-no-fire", timeout: .seconds(10), returnAfterSourceHandled: false), .finished)
        XCTAssertEqual(fired, 1, "the overdue timer fires on the first pass")
    }

    func testATimerNeverFiresBeforeItsFireDate() {
        var firedAt: [Deadline] = []
        var scheduled: [Deadline] = []
        for index in 1...5 {
            let timer = LoopTimer(after: .milliseconds(3 * index)) { firedAt.append(.now()) ; _ = $0 }
            scheduled.append(timer.fireDate)
            loop.add(timer, to: "never-early")
        }
        XCTAssertEqual(loop.run(mode: "never-early", timeout: .seconds(10), returnAfterSourceHandled: false), .finished)
        XCTAssertEqual(firedAt.count, 5)
        for (fired, due) in zip(firedAt, scheduled) { XCTAssertGreaterThanOrEqual(fired, due) }
    }

    func testRepeatingTimerSkipsMissedFiresAndStaysOnGrid() {
        let interval = Duration.milliseconds(50)
        let origin = Deadline.now() + .milliseconds(-175) // three and a half intervals late
        var fires = 0
        let timer = LoopTimer(fireAt: origin, interval: interval) { _ in fires += 1 }
        loop.add(timer, to: "grid")
        XCTAssertEqual(loop.run(mode: "grid", timeout: .zero, returnAfterSourceHandled: false), .timedOut)
        let after = Deadline.now()
        XCTAssertEqual(fires, 1, "one fire for the whole missed period")
        let offset = UInt64((timer.fireDate - origin).totalNanoseconds)
        XCTAssertEqual(offset % UInt64(interval.totalNanoseconds), 0, "the next fire is on the original grid")
        XCTAssertGreaterThan(timer.fireDate, after, "the next fire is in the future")
        XCTAssertLessThanOrEqual(timer.fireDate - after, interval, "and it is the first grid point after now")
        timer.invalidate()
    }

    func testNextGridPointIsTheFirstPointAfterNow() {
        let origin = Deadline(rawValue: 1_000)
        let step = Duration.nanoseconds(100)
        XCTAssertEqual(LoopTimer.nextGridPoint(after: Deadline(rawValue: 1_000), from: origin, every: step).rawValue, 1_100)
        XCTAssertEqual(LoopTimer.nextGridPoint(after: Deadline(rawValue: 1_099), from: origin, every: step).rawValue, 1_100)
        XCTAssertEqual(LoopTimer.nextGridPoint(after: Deadline(rawValue: 1_100), from: origin, every: step).rawValue, 1_200)
        XCTAssertEqual(LoopTimer.nextGridPoint(after: Deadline(rawValue: 1_350), from: origin, every: step).rawValue, 1_400)
        XCTAssertEqual(LoopTimer.nextGridPoint(after: Deadline(rawValue: 500), from: origin, every: step).rawValue, 1_100)
    }

    func testToleranceLetsTimersWhoseWindowsOverlapFireInOneWakeUp() {
        let now = Deadline.now()
        let tolerant = LoopTimer(fireAt: now + .milliseconds(20), tolerance: .milliseconds(100)) { _ in }
        let strict = LoopTimer(fireAt: now + .milliseconds(60)) { _ in }
        let far = LoopTimer(fireAt: now + .seconds(10)) { _ in }
        let items = ModeItems(mode: "tolerance")
        for timer in [tolerant, strict, far] { _ = items.insert(.timer(timer)) }
        XCTAssertEqual(loop.timerWakeTime(in: items), strict.fireDate, "wake once, when both are due")
        tolerant.tolerance = .milliseconds(10)
        XCTAssertEqual(loop.timerWakeTime(in: items), tolerant.fireDate, "no overlap: wake for the first")

        var wakeUps = 0
        var firedInWake: [Int] = []
        tolerant.tolerance = .milliseconds(100)
        let counter = LoopObserver(activities: .afterWaiting) { _, _ in wakeUps += 1 }
        loop.add(counter, to: "tolerance")
        for timer in [tolerant, strict] {
            let watcher = LoopTimer(fireAt: timer.fireDate, tolerance: timer.tolerance) { _ in firedInWake.append(wakeUps) }
            loop.add(watcher, to: "tolerance")
        }
        XCTAssertEqual(loop.run(mode: "tolerance", timeout: .seconds(10), returnAfterSourceHandled: false), .finished)
        XCTAssertEqual(firedInWake.count, 2)
        XCTAssertEqual(Set(firedInWake).count, 1, "both fired after the same wake-up")
        counter.invalidate()
    }

    func testATimerOnlyFiresInItsModes() {
        var fired = 0
        let timer = LoopTimer(after: .zero) { _ in fired += 1 }
        let keepAlive = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(timer, to: "timer-mode")
        loop.add(keepAlive, to: "other-mode")
        XCTAssertEqual(loop.run(mode: "other-mode", timeout: .milliseconds(20), returnAfterSourceHandled: false), .timedOut)
        XCTAssertEqual(fired, 0)
        XCTAssertEqual(loop.run(mode: "timer-mode", timeout: .seconds(10), returnAfterSourceHandled: false), .finished)
        XCTAssertEqual(fired, 1)
        keepAlive.invalidate()
    }

    func testATimerInCommonModesFiresInEveryCommonMode() {
        // On a thread of its own: a fresh loop whose common modes no other test touches.
        TestThread {
            let loop = ThreadRunLoop.current
            var modes: [LoopMode?] = []
            let timer = LoopTimer(after: .zero, repeating: .milliseconds(1)) { [loop] _ in modes.append(loop.currentMode) }
            loop.addCommonMode("common-timer-mode")
            loop.add(timer, to: .common)
            _ = loop.run(mode: .default, timeout: .milliseconds(5), returnAfterSourceHandled: false)
            _ = loop.run(mode: "common-timer-mode", timeout: .milliseconds(5), returnAfterSourceHandled: false)
            XCTAssertTrue(modes.contains(.default))
            XCTAssertTrue(modes.contains("common-timer-mode"))
            timer.invalidate()
        }.join()
    }

    func testInvalidatingTheLastTimerFromAnotherThreadEndsTheRun() {
        let timer = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(timer, to: "remote-invalidate")
        let sleeping = DispatchSemaphore(value: 0)
        let observer = LoopObserver(activities: .beforeWaiting, repeats: false) { _, _ in sleeping.signal() }
        loop.add(observer, to: "remote-invalidate")
        let thread = TestThread {
            sleeping.wait()
            timer.invalidate()
        }
        XCTAssertEqual(loop.run(mode: "remote-invalidate", timeout: .seconds(10), returnAfterSourceHandled: false), .finished)
        XCTAssertFalse(loop.contains(timer, in: "remote-invalidate"))
        thread.join()
    }

    func testATimerInvalidatedOnAnotherThreadIsInNoModeBeforeTheLoopRunsAgain() {
        // Regression: a run could end `.finished` on the invalid timer while the loop had
        // not yet taken it off its list, and `contains` still said yes.
        let timer = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(timer, to: "invalidated-elsewhere")
        TestThread { timer.invalidate() }.join()
        XCTAssertFalse(loop.contains(timer, in: "invalidated-elsewhere"))
        XCTAssertEqual(loop.run(mode: "invalidated-elsewhere", timeout: .seconds(10), returnAfterSourceHandled: false),
                       .finished, "a mode whose only timer is invalid has nothing to run")
    }

    func testACallbackMayRescheduleAddAndInvalidateTimersItselfIncluded() {
        var log: [String] = []
        var oneShotFires = 0
        let oneShot = LoopTimer(after: .zero) { timer in
            oneShotFires += 1
            log.append("one-shot \(oneShotFires)")
            if oneShotFires < 3 { timer.fireDate = .now() } // reschedules itself
        }
        var repeats = 0
        let repeating = LoopTimer(after: .zero, repeating: .milliseconds(1)) { [loop] timer in
            repeats += 1
            if repeats == 2 {
                loop.add(LoopTimer(after: .zero) { _ in log.append("added") }, to: "callbacks")
            }
            if repeats == 4 { timer.invalidate() }
        }
        loop.add(oneShot, to: "callbacks")
        loop.add(repeating, to: "callbacks")
        XCTAssertEqual(loop.run(mode: "callbacks", timeout: .seconds(10), returnAfterSourceHandled: false), .finished)
        XCTAssertEqual(oneShotFires, 3)
        XCTAssertEqual(repeats, 4)
        XCTAssertEqual(log.filter { $0 == "added" }.count, 1)
        XCTAssertFalse(oneShot.isValid)
        XCTAssertFalse(repeating.isValid)
    }

    func testATimerNeverFiresWhileTheLoopIsNotRunning() {
        var fired = false
        let timer = LoopTimer(after: .zero) { _ in fired = true }
        loop.add(timer, to: "not-running")
        let other = LoopTimer(after: .zero) { _ in }
        loop.add(other, to: "running")
        _ = loop.run(mode: "running", timeout: .seconds(1), returnAfterSourceHandled: false)
        XCTAssertFalse(fired)
        XCTAssertTrue(timer.isValid)
        timer.invalidate()
    }
}
