import Dispatch
@testable import RunLoopCore
import RunLoopTestSupport
import XCTest

/// The exact observer sequences of the guide's sequence of events.
final class LoopObserverTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    /// Observes every activity of `mode` into a log, with markers added by the test.
    private func observeAll(_ mode: LoopMode, _ log: EventLog) -> LoopObserver {
        let observer = LoopObserver(activities: .all) { _, activity in log.append("\(activity)") }
        loop.add(observer, to: mode)
        return observer
    }

    func testATimerPassTellsEntryTimersSourcesSleepWakeThenFiresAndExits() {
        let log = EventLog()
        let observer = observeAll("timer-pass", log)
        loop.add(LoopTimer(after: .milliseconds(5)) { _ in log.append("TIMER") }, to: "timer-pass")
        XCTAssertEqual(loop.run(mode: "timer-pass", timeout: .seconds(10), returnAfterSourceHandled: false), .finished)
        XCTAssertEqual(log.all, ["entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting",
                                 "TIMER", "exit"])
        observer.invalidate()
    }

    func testASourcePassPerformsWithoutSleepingAndReturnsHandledSource() {
        let log = EventLog()
        let observer = observeAll("source-pass", log)
        let source = InputSource { log.append("SOURCE") }
        loop.add(source, to: "source-pass")
        source.signal()
        XCTAssertEqual(loop.run(mode: "source-pass", timeout: .seconds(10), returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(log.all, ["entry", "beforeTimers", "beforeSources", "SOURCE", "exit"])
        source.invalidate()
        observer.invalidate()
    }

    func testAWakeUpRestartsThePassAtTheTimerNotification() {
        let log = EventLog()
        let source = InputSource { log.append("SOURCE") }
        var sleeps = 0
        let observer = LoopObserver(activities: .all) { [loop] _, activity in
            log.append("\(activity)")
            guard activity == .beforeWaiting else { return }
            sleeps += 1
            if sleeps == 1 { loop.wakeUp() } else { source.signal() ; loop.wakeUp() }
        }
        loop.add(observer, to: "wake-pass")
        loop.add(source, to: "wake-pass")
        XCTAssertEqual(loop.run(mode: "wake-pass", timeout: .seconds(10), returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(log.all, [
            "entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting",
            "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting",
            "beforeTimers", "beforeSources", "SOURCE", "exit",
        ])
        source.invalidate()
        observer.invalidate()
    }

    func testATimeoutSleepsOnceThenExits() {
        let log = EventLog()
        let observer = observeAll("timeout-pass", log)
        let timer = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(timer, to: "timeout-pass")
        XCTAssertEqual(loop.run(mode: "timeout-pass", timeout: .milliseconds(10), returnAfterSourceHandled: false), .timedOut)
        XCTAssertEqual(log.all, ["entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "exit"])
        timer.invalidate()
        observer.invalidate()
    }

    func testAStopFromAnotherThreadWakesTheLoopAndExitsAfterTheWakeNotification() {
        let log = EventLog()
        let stopper = DispatchSemaphore(value: 0)
        let observer = LoopObserver(activities: .all) { _, activity in
            log.append("\(activity)")
            if activity == .beforeWaiting { stopper.signal() }
        }
        loop.add(observer, to: "stop-pass")
        let timer = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(timer, to: "stop-pass")
        let target = loop
        let thread = TestThread {
            stopper.wait()
            target.stop()
        }
        XCTAssertEqual(loop.run(mode: "stop-pass", until: .distantFuture, returnAfterSourceHandled: false), .stopped)
        thread.join()
        XCTAssertEqual(log.all, ["entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "exit"])
        timer.invalidate()
        observer.invalidate()
    }

    func testObserversAreToldInTheirOrderAndOnlyOfTheirActivities() {
        let log = EventLog()
        let late = LoopObserver(activities: .entry, order: 10) { _, _ in log.append("late") }
        let early = LoopObserver(activities: .entry, order: -5) { _, _ in log.append("early") }
        let exitOnly = LoopObserver(activities: .exit, order: 0) { _, _ in log.append("exit") }
        for observer in [late, early, exitOnly] { loop.add(observer, to: "ordered") }
        let timer = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(timer, to: "ordered")
        _ = loop.run(mode: "ordered", timeout: .zero, returnAfterSourceHandled: false)
        XCTAssertEqual(log.all, ["early", "late", "exit"])
        for observer in [late, early, exitOnly] { observer.invalidate() }
        timer.invalidate()
    }

    func testAOneShotObserverIsRemovedAfterItsFirstCallback() {
        var calls = 0
        let observer = LoopObserver(activities: .beforeTimers, repeats: false) { _, _ in calls += 1 }
        loop.add(observer, to: "one-shot")
        let timer = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(timer, to: "one-shot")
        _ = loop.run(mode: "one-shot", timeout: .zero, returnAfterSourceHandled: false)
        _ = loop.run(mode: "one-shot", timeout: .zero, returnAfterSourceHandled: false)
        XCTAssertEqual(calls, 1)
        XCTAssertFalse(observer.isValid)
        XCTAssertFalse(loop.contains(observer, in: "one-shot"))
        timer.invalidate()
    }

    func testObserversOfOtherModesAreNotTold() {
        var calls = 0
        let observer = LoopObserver(activities: .all) { _, _ in calls += 1 }
        loop.add(observer, to: "watched")
        let timer = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(timer, to: "unwatched")
        _ = loop.run(mode: "unwatched", timeout: .zero, returnAfterSourceHandled: false)
        XCTAssertEqual(calls, 0)
        observer.invalidate()
        timer.invalidate()
    }
}
