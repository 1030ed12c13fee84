import Dispatch
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// An actor pinned to a worker's run loop: every method runs on the worker's thread.
private actor Pinned {
    let worker: WorkerThread
    private(set) var log: [String] = []
    private(set) var count = 0

    init(_ worker: WorkerThread) { self.worker = worker }

    nonisolated var unownedExecutor: UnownedSerialExecutor { worker.executor.asUnownedSerialExecutor() }

    /// Where the method runs: whether the worker's loop owns this thread, and its name.
    func whereAmI() -> (onLoopThread: Bool, thread: String, pthread: pthread_t) {
        (worker.loop.isOwnerThread, currentThreadName(), pthread_self())
    }

    func increment() -> Bool {
        count += 1
        return worker.isCurrent
    }

    func record(_ event: String) { log.append(event) }

    /// Blocks the worker's thread inside a job until `gate` is signalled.
    func block(entered: DispatchSemaphore, gate: DispatchSemaphore) {
        entered.signal()
        gate.wait()
    }

    /// Slices of one job separated by yields; a due timer and a port message arrive meanwhile.
    func yieldAroundTheLoopsOwnWork(events: EventLog) async throws {
        let loop = ThreadRunLoop.current
        let port = try LocalPort { _ in events.append("message"); return nil }
        loop.add(port, to: .default)
        loop.add(LoopTimer(fireAt: .now()) { _ in events.append("timer") }, to: .default)
        try port.send(LoopMessage(id: 1))
        for slice in 0..<100 {
            events.append("slice \(slice)")
            if events.all.contains("timer") && events.all.contains("message") { break }
            await Task.yield()
        }
        port.invalidate()
    }

    /// Runs the loop nested inside this job, while another job of this actor is queued.
    func runTheLoopNestedWhileAnotherJobWaits(events: EventLog) -> Bool {
        let other = Task { self.record("other job") }
        _ = other
        let loop = ThreadRunLoop.current
        loop.perform { events.append("perform in the nested run") }
        let handled = loop.run(mode: .default, before: .after(.seconds(10)))
        events.append(log.contains("other job") ? "other job ran nested" : "other job waited")
        return handled
    }

    func countTimerTicks() { count += 1 }
}

final class LoopExecutorTests: XCTestCase {
    // MARK: - Isolation

    func testAnActorPinnedToAWorkerRunsEveryMethodOnTheWorkersThread() async throws {
        let worker = try WorkerThread(name: "pinned")
        let actor = Pinned(worker)
        let workerThread = try worker.performAndWait { pthread_self() }
        for _ in 0..<100 {
            let (onLoopThread, name, thread) = await actor.whereAmI()
            XCTAssertTrue(onLoopThread)
            XCTAssertEqual(name, "pinned")
            XCTAssertNotEqual(pthread_equal(thread, workerThread), 0)
        }
        XCTAssertNotEqual(pthread_equal(pthread_self(), workerThread), 1, "the test itself is elsewhere")
        worker.stop()
    }

    func testJobsFromManyTasksAllRunOnTheLoopThreadOneAfterAnother() async throws {
        let worker = try WorkerThread(name: "many-tasks")
        let actor = Pinned(worker)
        let allOnWorker = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    var onWorker = true
                    for _ in 0..<250 where !(await actor.increment()) { onWorker = false }
                    return onWorker
                }
            }
            return try await group.reduce(true) { $0 && $1 }
        }
        XCTAssertTrue(allOnWorker)
        let count = await actor.count
        XCTAssertEqual(count, 2000)
        worker.stop()
    }

    func testAWorkersExecutorAskedFromManyThreadsAtOnceIsOneObjectTheLoopsOwn() throws {
        let worker = try WorkerThread(name: "first-ask")
        let seen = LockedValue<[ObjectIdentifier]>([])
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            let executor = worker.executor
            seen.withLock { $0.append(ObjectIdentifier(executor)) }
        }
        let identities = Set(seen.withLock { $0 })
        XCTAssertEqual(identities.count, 1, "the first asks race, and one executor wins for all")
        XCTAssertEqual(identities.first, ObjectIdentifier(worker.loop.executor(modes: [.common])))
        worker.stop()
    }

    func testEveryActorPinnedToALoopSharesItsExecutorForTheSameModes() throws {
        let worker = try WorkerThread(name: "shared")
        let other = try WorkerThread(name: "other")
        XCTAssertTrue(worker.executor === worker.executor)
        XCTAssertTrue(worker.executor === worker.loop.executor(modes: [.common]))
        let defaultOnly = worker.loop.executor(modes: [.default])
        XCTAssertFalse(defaultOnly === worker.executor, "another set of modes, another executor")
        XCTAssertTrue(worker.loop.executor(modes: [.default, .common]) === worker.loop.executor(modes: [.common, .default]))
        XCTAssertTrue(defaultOnly.isSameExclusiveExecutionContext(other: worker.executor), "one thread")
        XCTAssertFalse(other.executor.isSameExclusiveExecutionContext(other: worker.executor))
        worker.stop()
        other.stop()
    }

    func testAssumeIsolatedWorksInTheLoopsOwnCallbacksAndOnlyOnItsThread() async throws {
        let worker = try WorkerThread(name: "assume")
        let actor = Pinned(worker)
        let ticked = DispatchSemaphore(value: 0)
        XCTAssertEqual(worker.executor.isIsolatingCurrentContext(), false)
        XCTAssertEqual(try worker.performAndWait { worker.executor.isIsolatingCurrentContext() }, true)
        try worker.performAndWait {
            // A timer callback is no job of the executor: `assumeIsolated` asks the executor.
            ThreadRunLoop.current.add(LoopTimer(after: .milliseconds(1)) { _ in
                actor.assumeIsolated { $0.countTimerTicks() }
                ticked.signal()
            }, to: .default)
        }
        waitOrFail(ticked, "the timer")
        let count = await actor.count
        XCTAssertEqual(count, 1)
        worker.stop()
    }

    // MARK: - Ordering against perform requests

    func testInOnePassThePerformRequestsQueuedBeforeItRunBeforeTheJobsQueuedBeforeIt() async throws {
        let worker = try WorkerThread(name: "order-job")
        let actor = Pinned(worker)
        let log = EventLog()
        let (entered, gate) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let blocker = Task { await actor.block(entered: entered, gate: gate) }
        waitOrFail(entered, "the blocking job")
        // All four are queued while a job of the pass runs: they wait for the next pass.
        let done = DispatchSemaphore(value: 0)
        worker.loop.perform { log.append("perform 1"); done.signal() }
        let job1 = Task(executorPreference: worker.executor.taskExecutor) { log.append("job 1") }
        worker.loop.perform { log.append("perform 2"); done.signal() }
        let job2 = Task(executorPreference: worker.executor.taskExecutor) { log.append("job 2") }
        gate.signal()
        await blocker.value
        await job1.value
        await job2.value
        waitOrFail(done, "perform 1")
        waitOrFail(done, "perform 2")
        XCTAssertEqual(log.all, ["perform 1", "perform 2", "job 1", "job 2"])
        worker.stop()
    }

    func testJobsEnqueuedWhileAPassRunsItsPerformRequestsRunInThatSamePass() async throws {
        let worker = try WorkerThread(name: "order-perform")
        let executor = worker.executor
        try await worker.submit {} // the executor's source is in the worker's modes from this pass on
        let log = EventLog()
        let (entered, gate) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        worker.loop.perform { entered.signal(); gate.wait() }
        waitOrFail(entered, "the blocking perform")
        let done = DispatchSemaphore(value: 0)
        let job1 = Task(executorPreference: executor.taskExecutor) { log.append("job 1") }
        worker.loop.perform { log.append("perform"); done.signal() }
        let job2 = Task(executorPreference: executor.taskExecutor) { log.append("job 2") }
        gate.signal()
        await job1.value
        await job2.value
        waitOrFail(done, "the perform")
        XCTAssertEqual(log.all, ["job 1", "job 2", "perform"],
                       "the jobs' source performs after the pass's perform requests; the new request waits a pass")
        worker.stop()
    }

    // MARK: - Interleaving

    func testAJobThatYieldsLetsTheLoopsTimersAndPortsRunBetweenItsSlices() async throws {
        let worker = try WorkerThread(name: "interleave")
        let actor = Pinned(worker)
        let events = EventLog()
        try await actor.yieldAroundTheLoopsOwnWork(events: events)
        let log = events.all
        // The due timer fires in the very pass the job yielded in (step 9), before its next slice.
        XCTAssertEqual(Array(log.prefix(2)), ["slice 0", "timer"], "\(log)")
        let message = try XCTUnwrap(log.firstIndex(of: "message"), "\(log)")
        XCTAssertTrue(log[(message + 1)...].contains { $0.hasPrefix("slice") }, "the job went on after it: \(log)")
        XCTAssertLessThan(log.count, 10, "within a few passes, not after 100 slices: \(log)")
        worker.stop()
    }

    func testAJobNeverRunsInsideAnotherJobOfTheSameExecutorWhenTheLoopRunsNested() async throws {
        let worker = try WorkerThread(name: "nested")
        let actor = Pinned(worker)
        let events = EventLog()
        let handled = await actor.runTheLoopNestedWhileAnotherJobWaits(events: events)
        XCTAssertTrue(handled)
        XCTAssertEqual(events.all, ["perform in the nested run", "other job waited"])
        // Once the first job returned, the other one runs.
        _ = try await worker.submit {}
        let log = await actor.log
        XCTAssertEqual(log, ["other job"])
        worker.stop()
    }

    // MARK: - Modes

    func testAnExecutorRunsItsJobsOnlyWhileTheLoopRunsInOneOfItsModes() async throws {
        let worker = try WorkerThread(name: "modes")
        let privateExecutor = worker.loop.executor(modes: ["private"])
        let log = EventLog()
        let job = Task(executorPreference: privateExecutor.taskExecutor) { log.append("job") }
        try await worker.submit {} // a pass in the default mode: the job waits
        try await worker.submit {}
        XCTAssertEqual(log.all, [])
        let result = try await worker.submit {
            ThreadRunLoop.current.run(mode: "private", timeout: .seconds(10), returnAfterSourceHandled: true)
        }
        XCTAssertEqual(result, .handledSource)
        await job.value
        XCTAssertEqual(log.all, ["job"])
        worker.stop()
    }

    func testATaskPreferringTheTaskExecutorRunsItsNonisolatedCodeOnTheLoopThread() async throws {
        let worker = try WorkerThread(name: "task-exec")
        let names = await Task(executorPreference: worker.executor.taskExecutor) {
            let before = currentThreadName()
            await Task.yield()
            return [before, currentThreadName()]
        }.value
        XCTAssertEqual(names, ["task-exec", "task-exec"])
        let scoped = await withTaskExecutorPreference(worker.executor.taskExecutor) { () async -> [String] in
            async let child = currentThreadName() // a child task inherits the preference
            return [currentThreadName(), await child]
        }
        XCTAssertEqual(scoped, ["task-exec", "task-exec"])
        worker.stop()
    }

    // MARK: - The loop's thread exits

    func testJobsQueuedWhenTheLoopsThreadExitsRunInOrderOnTheFallbackQueue() async throws {
        let worker = try WorkerThread(name: "exiting")
        let actor = Pinned(worker)
        let executor = worker.executor
        let (entered, gate) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let blocker = Task { await actor.block(entered: entered, gate: gate) }
        waitOrFail(entered, "the blocking job")
        // Queued during a job, so for a pass that never comes: the worker stops first.
        let log = EventLog()
        let late = (0..<3).map { index in
            Task(executorPreference: executor.taskExecutor) { log.append("\(index) on \(currentThreadName())") }
        }
        worker.control.stop(pending: .run, by: .requestOnly) // the resident run ends after this pass
        gate.signal()
        await blocker.value
        for task in late { await task.value }
        worker.stop()
        XCTAssertEqual(worker.state, .stopped)
        XCTAssertTrue(executor.loopThreadHasExited)
        XCTAssertEqual(log.all.map { $0.prefix(1) }, ["0", "1", "2"], "in order")
        XCTAssertFalse(log.all.contains { $0.hasSuffix("on exiting") }, "the thread is gone: \(log.all)")
        XCTAssertTrue(worker.executor === executor, "the worker keeps its loop, the table its executor")
    }

    func testAnActorWhoseWorkerStoppedStillRunsItsMethodsOneAtATime() async throws {
        let worker = try WorkerThread(name: "stopped")
        let actor = Pinned(worker)
        _ = await actor.increment()
        worker.stop()
        let onWorker = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    var onWorker = false
                    for _ in 0..<100 where await actor.increment() { onWorker = true }
                    return onWorker
                }
            }
            return try await group.reduce(false) { $0 || $1 }
        }
        XCTAssertFalse(onWorker)
        let count = await actor.count
        XCTAssertEqual(count, 401, "no increment lost: still one job at a time")
        XCTAssertTrue(worker.executor.loopThreadHasExited)
    }

    func testAnExecutorAskedOfALoopWhoseThreadHasExitedRunsItsJobsOnTheFallbackAtOnce() async throws {
        let thread = LoopThread()
        let loop = thread.loop
        thread.stop()
        let executor = loop.executor()
        XCTAssertTrue(executor.loopThreadHasExited)
        XCTAssertEqual(executor.isIsolatingCurrentContext(), false)
        let ran = await Task(executorPreference: executor.taskExecutor) { true }.value
        XCTAssertTrue(ran)
    }
}
