import Dispatch
@testable import RunLoopCore
import RunLoopSystem
import RunLoopTestSupport
import XCTest

final class PerformRequestTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    func testRequestsFromAnotherThreadRunInFIFOOrderAllInOnePass() {
        let log = EventLog()
        let keepAlive = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(keepAlive, to: .default)
        let target = loop
        TestThread {
            for index in 0..<50 { target.perform { log.append("\(index)") } }
        }.join()
        XCTAssertTrue(loop.run(mode: .default, before: .after(.seconds(10))))
        XCTAssertEqual(log.all, (0..<50).map(String.init), "all fifty, in order, in a single pass")
        keepAlive.invalidate()
    }

    func testAPerformWakesASleepingLoopAtOnce() {
        let worker = LoopThread()
        let ran = DispatchSemaphore(value: 0)
        let onLoopThread = LockedValue<Bool?>(nil)
        worker.loop.perform {
            onLoopThread.withLock { $0 = worker.loop.isOwnerThread }
            ran.signal()
        }
        waitOrFail(ran, "the perform to run")
        XCTAssertEqual(onLoopThread.withLock { $0 }, true)
        worker.stop()
    }

    func testRequestsWaitForARunInOneOfTheirModes() {
        let log = EventLog()
        let keepAlive = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(keepAlive, to: .default)
        loop.add(keepAlive, to: "private")
        loop.perform(inModes: ["private"]) { log.append("private") }
        loop.perform(inModes: [.default]) { log.append("default") }
        XCTAssertTrue(loop.run(mode: .default, before: .after(.seconds(10))))
        XCTAssertEqual(log.all, ["default"])
        XCTAssertTrue(loop.run(mode: "private", before: .after(.seconds(10))))
        XCTAssertEqual(log.all, ["default", "private"])
        keepAlive.invalidate()
    }

    func testACancelledRequestNeverRuns() {
        let log = EventLog()
        let keepAlive = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(keepAlive, to: .default)
        let cancelled = loop.perform { log.append("cancelled") }
        loop.perform(tag: "kept") { log.append("kept") }
        XCTAssertTrue(cancelled.cancel())
        XCTAssertFalse(cancelled.cancel(), "cancelling twice cancels once")
        XCTAssertTrue(loop.run(mode: .default, before: .after(.seconds(10))))
        XCTAssertEqual(log.all, ["kept"])
        XCTAssertEqual(cancelled.state, .cancelled)
        keepAlive.invalidate()
    }

    func testADelayedPerformRunsAfterItsDelayAndIsNotAHandledSource() {
        var ranAt: Deadline?
        let start = Deadline.now()
        let request = loop.schedulePerform(after: .milliseconds(20)) { ranAt = .now() }
        XCTAssertEqual(request.state, .pending)
        XCTAssertEqual(loop.run(mode: .default, timeout: .seconds(10), returnAfterSourceHandled: true), .finished)
        XCTAssertEqual(request.state, .done)
        XCTAssertGreaterThanOrEqual(ranAt! - start, .milliseconds(20))
    }

    func testCancelPerformRequestsCancelsOnlyTheTaggedOnesNotYetRun() {
        var log: [String] = []
        loop.schedulePerform(after: .zero, tag: "a") { log.append("a1") }
        loop.schedulePerform(after: .zero, tag: "b") { log.append("b") }
        loop.schedulePerform(after: .zero, tag: "a") { log.append("a2") }
        XCTAssertEqual(loop.cancelPerformRequests(tagged: "a"), 2)
        XCTAssertEqual(loop.run(mode: .default, timeout: .seconds(10), returnAfterSourceHandled: false), .finished)
        XCTAssertEqual(log, ["b"])
        XCTAssertEqual(loop.cancelPerformRequests(), 0, "nothing left to cancel")
    }

    func testPerformAndWaitReturnsTheResultFromTheLoopsThread() throws {
        let worker = LoopThread()
        let answer = try worker.loop.performAndWait { worker.loop.isOwnerThread ? 42 : -1 }
        XCTAssertEqual(answer, 42)
        struct Oops: Error {}
        XCTAssertThrowsError(try worker.loop.performAndWait { throw Oops() }) { XCTAssertTrue($0 is Oops) }
        worker.stop()
    }

    func testPerformAndWaitGivesBackOptionalsVoidAndLargeValuesExactlyAsTheWorkReturnedThem() throws {
        struct Large: Equatable, Sendable { // too large for an existential's inline buffer
            var words: [Int] = [1, 2, 3]
            var more = (4, 5, 6)
            var text = "large"
            static func == (lhs: Large, rhs: Large) -> Bool {
                lhs.words == rhs.words && lhs.more == rhs.more && lhs.text == rhs.text
            }
        }
        let worker = LoopThread()
        let none: Int? = try worker.loop.performAndWait { nil }
        XCTAssertNil(none)
        let some: Int?? = try worker.loop.performAndWait { .some(nil) }
        XCTAssertEqual(some, .some(nil))
        try worker.loop.performAndWait { () -> Void in }
        XCTAssertEqual(try worker.loop.performAndWait { Large() }, Large())
        let existential: any Sendable = try worker.loop.performAndWait { 7 as any Sendable }
        XCTAssertEqual(existential as? Int, 7)
        worker.stop()
    }

    func testPerformAndWaitOnTheLoopsOwnThreadRunsAtOnce() throws {
        var ran = false
        let box = LockedValue(false)
        try loop.performAndWait { box.withLock { $0 = true } }
        ran = box.withLock { $0 }
        XCTAssertTrue(ran)
    }

    func testPerformOnAnExitedThreadFailsCleanly() {
        let worker = LoopThread()
        worker.stop()
        XCTAssertEqual(worker.loop.perform {}.state, .cancelled)
        XCTAssertThrowsError(try worker.loop.performAndWait { 1 }) {
            XCTAssertEqual($0 as? RunLoopError, .loopTerminated)
        }
    }

    // MARK: - The request's own state machine: pending → running → done, or pending → cancelled

    private func request(modes: [LoopMode] = [.default], _ work: @escaping () -> Void = {}) -> PerformRequest {
        PerformRequest(modes: modes, tag: nil, work: work)
    }

    func testARunRequestGoesFromPendingThroughRunningToDoneAndRunsItsWorkOnce() {
        var seenWhileRunning: PerformRequest.State?
        var runs = 0
        var made: PerformRequest!
        made = request { runs += 1; seenWhileRunning = made.state }
        XCTAssertEqual(made.state, .pending)
        XCTAssertTrue(made.run())
        XCTAssertEqual(seenWhileRunning, .running)
        XCTAssertEqual(made.state, .done)
        XCTAssertFalse(made.run(), "a request runs once")
        XCTAssertFalse(made.cancel(), "a finished request cannot be cancelled")
        XCTAssertEqual(runs, 1)
        XCTAssertEqual(made.state, .done)
        XCTAssertEqual(made.waitUntilFinished(), .done)
    }

    func testACancelledRequestNeverRunsAndCancelsItsDelayTimer() {
        var runs = 0
        let made = request { runs += 1 }
        let timer = LoopTimer(after: .seconds(100)) { _ in }
        made.timer = timer
        XCTAssertTrue(made.cancel())
        XCTAssertEqual(made.state, .cancelled)
        XCTAssertFalse(timer.isValid, "a delayed request's timer goes with it")
        XCTAssertFalse(made.cancel(), "cancelling twice cancels once")
        XCTAssertFalse(made.run())
        XCTAssertEqual(runs, 0)
        XCTAssertEqual(made.waitUntilFinished(), .cancelled)
        XCTAssertEqual(made.waitUntilFinished(), .cancelled, "every waiter is let through")
    }

    func testTheWorkIsReleasedOnceTheRequestHasRunOrBeenCancelled() {
        final class Captured {}
        for cancelling in [false, true] {
            var captured: Captured? = Captured()
            weak let watched = captured
            let made = request { [captured] in _ = captured }
            captured = nil
            XCTAssertNotNil(watched, "the pending request holds its work")
            if cancelling { XCTAssertTrue(made.cancel()) } else { XCTAssertTrue(made.run()) }
            XCTAssertNil(watched, cancelling ? "dropped when cancelled" : "dropped once run")
        }
    }

    func testCancellingARunningRequestFailsAndItFinishesAsDone() {
        let started = DispatchSemaphore(value: 0), proceed = DispatchSemaphore(value: 0)
        let made = request { started.signal(); proceed.wait() }
        let runner = TestThread { _ = made.run() }
        waitOrFail(started, "the work to start")
        XCTAssertFalse(made.cancel(), "too late: the work has started")
        XCTAssertEqual(made.state, .running)
        proceed.signal()
        XCTAssertEqual(made.waitUntilFinished(), .done)
        runner.join()
    }

    func testWhenCancelAndRunRaceExactlyOneWinsAndWaitersSeeItsOutcome() {
        for _ in 0..<2_000 {
            let runs = LockedValue(0)
            let made = request { runs.withLock { $0 += 1 } }
            let outcomes = LockedValue<[Int: Bool]>([:])
            let waited = LockedValue<PerformRequest.State?>(nil)
            let waiter = TestThread { waited.withLock { $0 = made.waitUntilFinished() } }
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                let won = index == 0 ? made.run() : made.cancel()
                outcomes.withLock { $0[index] = won }
            }
            waiter.join()
            let (ran, cancelled) = outcomes.withLock { ($0[0]!, $0[1]!) }
            XCTAssertNotEqual(ran, cancelled, "exactly one of run and cancel wins")
            XCTAssertEqual(runs.withLock { $0 }, ran ? 1 : 0)
            XCTAssertEqual(made.state, ran ? .done : .cancelled)
            XCTAssertEqual(waited.withLock { $0 }, made.state)
        }
    }

    func testARequestIsPendingOnlyForItsModesAndForCommonModesWhenItAskedForCommon() {
        let made = request(modes: ["a", .common])
        XCTAssertTrue(made.isPending(for: "a", modeIsCommon: false))
        XCTAssertFalse(made.isPending(for: "b", modeIsCommon: false))
        XCTAssertTrue(made.isPending(for: "b", modeIsCommon: true))
        let plain = request(modes: ["a"])
        XCTAssertFalse(plain.isPending(for: "b", modeIsCommon: true), "common modes matter only to .common requests")
        XCTAssertTrue(made.cancel())
        XCTAssertFalse(made.isPending(for: "a", modeIsCommon: false), "a cancelled request is pending nowhere")
        XCTAssertTrue(plain.run())
        XCTAssertFalse(plain.isPending(for: "a", modeIsCommon: false), "nor is one that ran")
    }
}
