import Dispatch
@testable import RunLoopCore // for core internals it reads: the loop's perform queue
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// An actor pinned to a worker, calling the async performs from the worker's own thread.
private actor OnWorker {
    let worker: WorkerThread
    init(_ worker: WorkerThread) { self.worker = worker }
    nonisolated var unownedExecutor: UnownedSerialExecutor { worker.executor.asUnownedSerialExecutor() }

    /// Queues a perform request, then submits work: run at once, it overtakes the request.
    func submitBehindAQueuedPerform(events: EventLog) async throws {
        worker.loop.perform { events.append("queued perform") }
        try await worker.loop.submit { events.append("submitted") }
        try await worker.submit { events.append("run") }
        events.append("after")
    }
}

/// `ThreadRunLoop.submit` and `WorkerThread.run`: the async forms of `performAndWait` and `sync`.
final class AsyncPerformTests: XCTestCase {
    private struct Oops: Error, Equatable {}

    // MARK: - Results

    func testSubmitReturnsTheResultOfTheWorkRunOnTheLoopsThread() async throws {
        let thread = LoopThread()
        let (answer, onLoopThread) = try await thread.loop.submit { (6 * 7, thread.loop.isOwnerThread) }
        XCTAssertEqual(answer, 42)
        XCTAssertTrue(onLoopThread)
        do {
            _ = try await thread.loop.submit { () throws -> Int in throw Oops() }
            XCTFail("the work's error was not rethrown")
        } catch {
            XCTAssertEqual(error as? Oops, Oops())
        }
        thread.stop()
    }

    func testRunReturnsTheResultOfTheWorkRunOnTheWorkerAndRethrowsItsError() async throws {
        let worker = try WorkerThread(name: "run")
        let name = try await worker.submit { currentThreadName() }
        XCTAssertEqual(name, "run")
        do {
            try await worker.submit { throw Oops() }
            XCTFail("the work's error was not rethrown")
        } catch {
            XCTAssertEqual(error as? Oops, Oops())
        }
        worker.stop()
    }

    func testOnTheLoopsOwnThreadTheWorkRunsAtOnceAheadOfQueuedRequests() async throws {
        let worker = try WorkerThread(name: "inline")
        let actor = OnWorker(worker)
        let events = EventLog()
        try await actor.submitBehindAQueuedPerform(events: events)
        try await worker.submit {}
        XCTAssertEqual(events.all, ["submitted", "run", "after", "queued perform"])
        worker.stop()
    }

    func testWaitingTasksBlockNoThreadOfTheCooperativePool() throws {
        let thread = LoopThread()
        let (entered, gate) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        thread.loop.perform { entered.signal(); gate.wait() }
        waitOrFail(entered, "the loop to be busy")
        // Far more waiters than the pool has threads: were each to block one, nothing else would run.
        let finished = DispatchSemaphore(value: 0)
        let sum = SharedValue(0)
        for index in 1...64 {
            Task {
                let value = try await thread.loop.submit { index }
                sum.withLock { $0 += value }
                finished.signal()
            }
        }
        let probe = DispatchSemaphore(value: 0)
        Task { probe.signal() }
        waitOrFail(probe, "a task to run while 64 tasks wait for the busy loop")
        gate.signal()
        for _ in 1...64 { waitOrFail(finished, "the submitted work") }
        XCTAssertEqual(sum.withLock { $0 }, (1...64).reduce(0, +))
        thread.stop()
    }

    // MARK: - Cancellation

    func testCancellingTheTaskBeforeTheWorkStartsCancelsTheRequestAndThrowsCancellationError() throws {
        let worker = try WorkerThread(name: "cancel-task")
        let (entered, gate) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        try worker.perform { entered.signal(); gate.wait() }
        waitOrFail(entered, "the worker to be busy")
        let ran = SharedValue(false)
        let outcome = SharedValue<(any Error)?>(nil)
        let done = DispatchSemaphore(value: 0)
        // Starts at once on this thread, so the request is queued when `immediate` returns.
        let task = Task.immediate {
            do {
                try await worker.loop.submit { ran.withLock { $0 = true } }
            } catch {
                outcome.withLock { $0 = error }
            }
            done.signal()
        }
        XCTAssertEqual(worker.loop.queueLock.withLock { worker.loop.performQueue.count }, 1, "queued, not yet run")
        task.cancel()
        waitOrFail(done, "the cancelled task, while the worker is still busy")
        XCTAssertTrue(outcome.withLock { $0 } is CancellationError, "\(String(describing: outcome.withLock { $0 }))")
        gate.signal()
        try worker.performAndWait {}
        XCTAssertFalse(ran.withLock { $0 }, "a cancelled request never runs")
        worker.stop()
    }

    func testATaskCancelledBeforeItSubmitsThrowsCancellationErrorAndQueuesNothing() async throws {
        let thread = LoopThread()
        let ran = SharedValue(false)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await thread.loop.submit { ran.withLock { $0 = true } }
        }
        let result = await task.result
        XCTAssertThrowsError(try result.get()) { XCTAssertTrue($0 is CancellationError) }
        try await thread.loop.submit {}
        XCTAssertFalse(ran.withLock { $0 })
        thread.stop()
    }

    func testWorkThatStartedIsAwaitedEvenIfTheTaskIsCancelledMeanwhile() throws {
        let worker = try WorkerThread(name: "started")
        let (entered, gate) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let result = SharedValue<Result<Int, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let task = Task {
            do {
                let value = try await worker.submit { entered.signal(); gate.wait(); return 7 }
                result.withLock { $0 = .success(value) }
            } catch {
                result.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        waitOrFail(entered, "the work to start")
        task.cancel()
        gate.signal()
        waitOrFail(done, "the task")
        XCTAssertEqual(try result.withLock { $0 }?.get(), 7, "its effects happened, so its result is returned")
        worker.stop()
    }

    // MARK: - Work that is not run

    func testSubmittingToALoopWhoseThreadExitedThrowsLoopTerminated() async throws {
        let thread = LoopThread()
        let loop = thread.loop
        thread.stop()
        do {
            try await loop.submit {}
            XCTFail("work submitted to a torn-down loop ran")
        } catch {
            XCTAssertEqual(error as? RunLoopError, .loopTerminated)
        }
    }

    func testWorkCancelledByCancelPerformRequestsThrowsCancelled() throws {
        let worker = try WorkerThread(name: "cancel-all")
        let (entered, gate) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        try worker.perform { entered.signal(); gate.wait() }
        waitOrFail(entered, "the worker to be busy")
        let errors = EventLog()
        let done = DispatchSemaphore(value: 0)
        Task.immediate {
            do { try await worker.loop.submit {} } catch { errors.append("loop: \(error)") }
            done.signal()
        }
        Task.immediate {
            do { try await worker.submit {} } catch { errors.append("worker: \(error)") }
            done.signal()
        }
        XCTAssertEqual(worker.loop.cancelPerformRequests(), 2)
        waitOrFail(done, "the first waiter")
        waitOrFail(done, "the second waiter")
        XCTAssertEqual(Set(errors.all), ["loop: \(RunLoopError.cancelled)", "worker: \(RunLoopError.cancelled)"])
        gate.signal()
        worker.stop()
    }

    func testRunOnAStoppedWorkerOrOneStoppingWithCancelThrowsStopped() async throws {
        let worker = try WorkerThread(name: "stopping")
        let (entered, gate) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        try worker.perform { entered.signal(); gate.wait() }
        waitOrFail(entered, "the worker to be busy")
        let queued = Task.immediate { try await worker.submit { XCTFail("cancelled work ran") } }
        let stopper = TestThread { worker.stop(pending: .cancel) }
        let result = await queued.result
        XCTAssertThrowsError(try result.get()) { XCTAssertEqual($0 as? RunLoopError, .stopped) }
        gate.signal()
        stopper.join()
        do {
            try await worker.submit {}
            XCTFail("a stopped worker ran work")
        } catch {
            XCTAssertEqual(error as? RunLoopError, .stopped)
        }
    }
}
