import Dispatch
import Foundation
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// `WorkerThread`'s stop: what happens to queued work and to the callers waiting for it,
/// and joining, from any thread and at any point of the worker's life. (The rest of its
/// tests are in `WorkerThreadTests`.)
final class WorkerThreadStopTests: XCTestCase {
    // MARK: - A stopped worker

    func testHandingWorkToAStoppedWorkerThrowsStoppedAndNeverHangs() throws {
        let worker = try WorkerThread(name: "stopped")
        worker.stop()
        XCTAssertEqual(worker.state, .stopped)
        XCTAssertThrowsError(try worker.perform {}) { XCTAssertEqual($0 as? RunLoopError, .stopped) }
        XCTAssertThrowsError(try worker.performAndWait { 1 }) { XCTAssertEqual($0 as? RunLoopError, .stopped) }
        XCTAssertThrowsError(try worker.performAndWait {}) { XCTAssertEqual($0 as? RunLoopError, .stopped) }
        XCTAssertThrowsError(try worker.perform(after: .zero) {}) { XCTAssertEqual($0 as? RunLoopError, .stopped) }
        XCTAssertEqual(worker.cancelPerformRequests(), 0)
        // The loop itself, used directly, fails cleanly too.
        XCTAssertEqual(worker.loop.perform {}.state, .cancelled)
        XCTAssertThrowsError(try worker.loop.performAndWait { 1 }) {
            XCTAssertEqual($0 as? RunLoopError, .loopTerminated)
        }
    }

    // MARK: - Stop

    func testWorkersStoppedRightAfterInitExitAndAreJoinedWithoutHanging() throws {
        for index in 0..<200 {
            let worker = try WorkerThread(name: "instant-stop")
            worker.stop(pending: index.isMultiple(of: 2) ? .run : .cancel)
            XCTAssertEqual(worker.state, .stopped)
        }
        for _ in 0..<50 { _ = try WorkerThread(name: "instant-stop") } // released at once: deinit stops them
        XCTAssertFalse(liveThreadNames().contains("instant-stop"))
    }

    func testAStopBeforeTheWorkersLoopFirstRunsStillRunsTheQueuedWorkAndJoins() throws {
        let gate = DispatchSemaphore(value: 0)
        let worker = try WorkerThread(startingNamed: "early-stop") { gate.wait() }
        let log = EventLog()
        let requests = try (0..<3).map { index in try worker.perform { log.append("\(index)") } }
        worker.control.stop(pending: .run, by: .requestOnly) // asked while the thread is held in its set-up
        XCTAssertEqual(worker.state, .stopping)
        XCTAssertThrowsError(try worker.perform {}) { XCTAssertEqual($0 as? RunLoopError, .stopped) }
        gate.signal()
        worker.stop()
        XCTAssertEqual(worker.state, .stopped)
        XCTAssertEqual(log.all, ["0", "1", "2"], "run in the thread's last step, without a resident run")
        XCTAssertEqual(requests.map(\.state), [.done, .done, .done])
        XCTAssertFalse(liveThreadNames().contains("early-stop"))
    }

    func testAStopWithCancelBeforeTheWorkersLoopFirstRunsWakesWaitersWithStopped() throws {
        let gate = DispatchSemaphore(value: 0)
        let worker = try WorkerThread(startingNamed: "early-cancel") { gate.wait() }
        let queued = try worker.perform { XCTFail("cancelled work ran") }
        worker.control.stop(pending: .cancel, by: .requestOnly)
        XCTAssertEqual(queued.waitUntilFinished(), .cancelled, "the waiter woke: its work will never run")
        XCTAssertEqual(worker.control.cancellationError, .stopped)
        gate.signal()
        worker.stop()
        XCTAssertEqual(worker.state, .stopped)
        XCTAssertEqual(queued.state, .cancelled)
    }

    func testStopJoinsTheThreadAndStoppingTwiceIsHarmless() throws {
        let worker = try WorkerThread(name: "stop-twice")
        try worker.performAndWait {} // init does not wait for the thread: this does
        XCTAssertTrue(liveThreadNames().contains("stop-twice"))
        worker.stop()
        XCTAssertEqual(worker.state, .stopped)
        XCTAssertFalse(liveThreadNames().contains("stop-twice"), "joined: the thread is gone")
        worker.stop()
        worker.stop(pending: .cancel)
        XCTAssertEqual(worker.state, .stopped)
    }

    func testStopFromSeveralThreadsAtOnceReturnsEverywhereOnceTheThreadIsJoined() throws {
        let worker = try WorkerThread(name: "stop-many")
        let gate = try occupyWorker { _ = try worker.perform($0) } // every stopper arrives while it works
        let go = DispatchSemaphore(value: 0)
        let states = SharedValue<[WorkerThread.State]>([])
        let stoppers = (0..<8).map { index in
            TestThread {
                go.wait()
                worker.stop(pending: index.isMultiple(of: 2) ? .run : .cancel)
                states.withLock { $0.append(worker.state) }
            }
        }
        for _ in stoppers { go.signal() }
        gate.signal()
        for stopper in stoppers { stopper.join() }
        XCTAssertEqual(states.withLock { $0 }, Array(repeating: .stopped, count: 8))
        XCTAssertFalse(liveThreadNames().contains("stop-many"))
    }

    func testStopRunsTheWorkQueuedBeforeItByDefault() throws {
        let worker = try WorkerThread(name: "stop-run")
        let log = EventLog()
        let gate = try occupyWorker { _ = try worker.perform($0) }
        let requests = try (0..<3).map { index in try worker.perform { log.append("\(index)") } }
        let stopping = DispatchSemaphore(value: 0)
        let stopper = TestThread {
            stopping.signal()
            worker.stop()
        }
        waitOrFail(stopping, "the stopper")
        gate.signal()
        stopper.join()
        XCTAssertEqual(log.all, ["0", "1", "2"])
        XCTAssertEqual(requests.map(\.state), [.done, .done, .done])
    }

    func testStopOnTheWorkersOwnThreadRunsThePendingWorkInItsLastStep() throws {
        let worker = try WorkerThread(name: "self-stop")
        let gate = DispatchSemaphore(value: 0)
        let busy = DispatchSemaphore(value: 0)
        let log = EventLog()
        let selfStop = try worker.perform {
            busy.signal()
            gate.wait()
            worker.stop() // cannot join itself: returns at once
            log.append("stop returned")
        }
        waitOrFail(busy, "the worker to be busy")
        // Queued after the running batch: these run in the worker's last step.
        let pending = try (0..<3).map { index in try worker.perform { log.append("\(index)") } }
        gate.signal()
        worker.stop() // from here: joins
        XCTAssertEqual(selfStop.state, .done)
        XCTAssertEqual(log.all, ["stop returned", "0", "1", "2"])
        XCTAssertEqual(pending.map(\.state), [.done, .done, .done])
        XCTAssertEqual(worker.state, .stopped)
    }

    func testStopWithCancelCancelsQueuedWorkAndWakesItsWaitersAtOnce() throws {
        let worker = try WorkerThread(name: "stop-cancel")
        let gate = try occupyWorker { _ = try worker.perform($0) }
        let queued = try worker.perform { XCTFail("cancelled work ran") }
        let stopper = TestThread { worker.stop(pending: .cancel) }
        // The worker is still busy (the gate is closed), yet the waiter wakes: the stop cancelled its work.
        XCTAssertEqual(queued.waitUntilFinished(), .cancelled, "the waiter woke: its work will never run")
        XCTAssertEqual(worker.control.cancellationError, .stopped)
        XCTAssertEqual(worker.state, .stopping)
        gate.signal()
        stopper.join()
        XCTAssertEqual(worker.state, .stopped)
        XCTAssertEqual(queued.state, .cancelled)
    }

    func testACallerBlockedInPerformAndWaitWhileTheWorkerStopsGetsStopped() throws {
        let worker = try WorkerThread(name: "sync-stop")
        let gate = try occupyWorker { _ = try worker.perform($0) }
        let outcome = SharedValue<Result<Int, RunLoopError>?>(nil)
        let caller = TestThread {
            let result = Result { try worker.performAndWait { 1 } }.mapError { $0 as? RunLoopError ?? .cancelled }
            outcome.withLock { $0 = result }
        }
        // Queued before the stop or refused after it: either way, an error and no hang.
        let stopper = TestThread { worker.stop(pending: .cancel) }
        caller.join()
        XCTAssertEqual(outcome.withLock { $0 }, .failure(.stopped))
        gate.signal()
        stopper.join()
    }

    func testWorkQueuedOnTheLoopAfterTheWorkersLastStepIsCancelledAsTheThreadExits() throws {
        let worker = try WorkerThread(name: "teardown")
        let gate = DispatchSemaphore(value: 0)
        let busy = DispatchSemaphore(value: 0)
        let late = SharedValue<PerformRequest?>(nil)
        let lateWaiter = SharedValue<TestThread?>(nil)
        let lateWaiterOutcome = SharedValue<Result<Int, RunLoopError>?>(nil)
        try worker.perform {
            busy.signal()
            gate.wait()
            worker.stop()
        }
        waitOrFail(busy, "the worker to be busy")
        // Runs in the worker's last step; queues more on the loop directly, past the worker's
        // gate: nothing will run it, so the loop's teardown must cancel it.
        try worker.perform {
            late.withLock { $0 = worker.loop.perform { XCTFail("ran after the last step") } }
            lateWaiter.withLock {
                $0 = TestThread {
                    let result = Result { try worker.loop.performAndWait { 1 } }
                        .mapError { $0 as? RunLoopError ?? .cancelled }
                    lateWaiterOutcome.withLock { $0 = result }
                }
            }
        }
        gate.signal()
        worker.stop()
        let request = try XCTUnwrap(late.withLock { $0 })
        XCTAssertEqual(request.waitUntilFinished(), .cancelled)
        lateWaiter.withLock { $0 }?.join()
        XCTAssertEqual(lateWaiterOutcome.withLock { $0 }, .failure(.loopTerminated))
    }

    func testStopEndsAWorkerWhoseWorkRunsTheLoopInANestedDefaultRun() throws {
        let nested = DispatchSemaphore(value: 0)
        let worker = try WorkerThread(name: "nested") {
            // A timer is no handled source: only the keep-alive source can end this.
            ThreadRunLoop.current.add(LoopTimer(after: .zero) { _ in
                nested.signal()
                _ = ThreadRunLoop.current.run(mode: .default, until: .distantFuture, returnAfterSourceHandled: false)
            }, to: .default)
        }
        waitOrFail(nested, "the nested run")
        let stopped = DispatchSemaphore(value: 0)
        let stopper = TestThread {
            worker.stop()
            stopped.signal()
        }
        waitOrFail(stopped, "the stop")
        stopper.join()
        XCTAssertEqual(worker.state, .stopped)
    }
}
