import RunLoopCore
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// A loop's counters: passes, wake-ups and messages handled. Each test counts the
/// difference its own runs, in a mode of its own, make. (Messages dropped, by the reasons
/// ports drop them: `MessageDropCountersTests` in RunLoopKitTests.)
final class LoopCountersTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }
    private var counters: LoopCounters { loop.counters }

    private func uniqueMode(_ base: String) -> LoopMode { LoopMode("\(base)-\(UInt32.random(in: 0...UInt32.max))") }

    func testANewLoopStartsWithEveryCounterAtZeroAndEveryDropReasonPresent() {
        let fresh = LockedValue<LoopCounters?>(nil)
        TestThread { fresh.withLock { $0 = ThreadRunLoop.current.counters } }.join()
        let counters = fresh.withLock { $0 }
        XCTAssertEqual(counters, LoopCounters())
        XCTAssertEqual(Set(counters?.messagesDropped.keys ?? [:].keys), Set(MessageDropReason.allCases))
        XCTAssertEqual(counters?.totalMessagesDropped, 0)
    }

    func testARunWithNoTimeMakesOnePassAndDoesNotCountAWakeUp() {
        let mode = uniqueMode("look")
        let source = InputSource {}
        loop.add(source, to: mode)
        let before = counters
        for _ in 0..<3 { _ = loop.run(mode: mode, timeout: .zero, returnAfterSourceHandled: false) }
        XCTAssertEqual(counters.passes - before.passes, 3)
        XCTAssertEqual(counters.wakeUps - before.wakeUps, 0, "a pass that only looks does not sleep")
        source.invalidate()
    }

    func testSleepingUntilATimerCountsOnePassAndOneWakeUp() throws {
        // On a fresh loop: a wake-up left pending on this thread's loop would end the
        // first sleep at once and count a second pass.
        let result = LockedValue<(RunResult, LoopCounters)?>(nil)
        TestThread {
            let loop = ThreadRunLoop.current
            loop.add(LoopTimer(after: .milliseconds(20)) { _ in }, to: .default)
            let run = loop.run(mode: .default, timeout: .seconds(20), returnAfterSourceHandled: false)
            result.withLock { $0 = (run, loop.counters) }
        }.join()
        let (run, counters) = try XCTUnwrap(result.withLock { $0 })
        XCTAssertEqual(run, .finished, "sleep until the timer, fire it, nothing left")
        XCTAssertEqual(counters.passes, 1)
        XCTAssertEqual(counters.wakeUps, 1)
    }

    func testEveryMessageDeliveredCountsAsHandled() throws {
        let mode = uniqueMode("messages")
        var received = 0
        let port = try FakePort { _ in received += 1 }
        loop.addItem(.port(port), binding: nil, to: mode)
        let before = counters
        TestThread { for _ in 0..<5 { port.send() } }.join()
        XCTAssertTrue(runCurrentLoop(in: mode) { received == 5 })
        XCTAssertEqual(counters.messagesHandled - before.messagesHandled, 5)
        XCTAssertEqual(counters.totalMessagesDropped - before.totalMessagesDropped, 0)
        loop.removeEverywhere(.port(port))
    }
}
