import Dispatch
import RunLoopCore
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// The verbs `LoopHandOff` implements once, where a type's part of them shows: a loop's
/// delayed perform from another thread, a pool's load, the result box.
final class LoopHandOffTests: XCTestCase {
    func testALoopTakesADelayedPerformFromAnotherThreadAndRunsItOnItsThreadAfterTheDelay() throws {
        let worker = try WorkerThread(name: "loop-delayed")
        let loop = worker.loop
        let ran = DispatchSemaphore(value: 0)
        let observed = SharedValue<(Duration, Bool)?>(nil)
        let start = Deadline.now()
        XCTAssertFalse(loop.isOwnerThread)
        loop.perform(after: .milliseconds(50)) {
            observed.withLock { $0 = (Deadline.now() - start, loop.isOwnerThread) }
            ran.signal()
        }
        waitOrFail(ran, "the delayed perform")
        let (elapsed, onLoopThread) = try XCTUnwrap(observed.withLock { $0 })
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(50))
        XCTAssertTrue(onLoopThread)
        worker.stop()
    }

    func testCancellingALoopsRequestsByTagReachesADelayedPerformStillBeingHandedOver() throws {
        let worker = try WorkerThread(name: "loop-cancel")
        let loop = worker.loop
        let log = EventLog()
        let done = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        loop.perform { gate.wait() } // the hand-over below stays queued behind this
        loop.perform(after: .milliseconds(50), tag: "cancelled") { log.append("cancelled") }
        XCTAssertEqual(loop.cancelPerformRequests(tagged: "cancelled"), 1, "the queued hand-over")
        gate.signal()
        // Timers fire in date order: once this one ran, the cancelled one would have.
        loop.perform(after: .milliseconds(100)) { done.signal() }
        waitOrFail(done, "the last delayed perform")
        XCTAssertEqual(log.all, [])
        worker.stop()
    }

    func testPerformAndWaitReturnsANilResultOfAnOptionalTypeAndRethrowsTheWorksError() throws {
        struct Oops: Error, Equatable {}
        let worker = try WorkerThread(name: "result")
        XCTAssertNil(try worker.loop.performAndWait { nil as Int? })
        XCTAssertEqual(try worker.loop.performAndWait { 42 as Int? }, 42)
        XCTAssertThrowsError(try worker.performAndWait { throw Oops() }) { XCTAssertEqual($0 as? Oops, Oops()) }
        worker.stop()
    }

    func testAPoolsDelayedPerformCountsAsItsWorkersLoadUntilItIsCancelled() throws {
        let pool = try WorkerPool(name: "lb-delayed", count: 2, policy: .leastBusy)
        func load() -> Int { pool.members.reduce(0) { $0 + $1.outstanding.load(ordering: .relaxed) } }
        try pool.perform(after: .seconds(3600), tag: "later") { XCTFail("a cancelled delayed perform ran") }
        for worker in pool.workers { try worker.performAndWait {} } // the hand-over has run: a timer now
        XCTAssertEqual(load(), 1, "the delayed perform, until it runs")
        XCTAssertEqual(pool.cancelPerformRequests(tagged: "later"), 1)
        XCTAssertEqual(load(), 0, "the cancelled request dropped its work, and with it the count")
        pool.stop()
    }
}
