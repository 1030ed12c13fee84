import Dispatch
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// The executor's job queue on its own: a queue made for a test mode, fed with real jobs
/// by tasks that prefer a `LoopTaskExecutor` over it, and driven by running the loop one
/// pass at a time (`timeout: .zero` makes exactly one pass).
final class LoopJobQueueTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    private func uniqueMode(_ base: String) -> LoopMode { LoopMode("\(base)-\(UInt32.random(in: 0...UInt32.max))") }

    /// A queue for `mode`, and a timer that keeps the mode runnable whether or not the
    /// queue's source is in it.
    private func makeQueue(in mode: LoopMode) -> (LoopJobQueue, LoopTaskExecutor, LoopTimer) {
        let queue = LoopJobQueue(loop: loop, modes: [mode])
        let keepAlive = LoopTimer(after: .seconds(1000)) { _ in }
        loop.add(keepAlive, to: mode)
        return (queue, LoopTaskExecutor(jobs: queue), keepAlive)
    }

    private func onePass(in mode: LoopMode) {
        XCTAssertEqual(loop.run(mode: mode, timeout: .zero, returnAfterSourceHandled: false), .timedOut)
    }

    func testJobsWaitUntilTheSourceIsScheduledThenRunInFIFOOrderInOnePassOfTheQueuesMode() {
        let mode = uniqueMode("jobs"), other = uniqueMode("other")
        let (queue, executor, keepAlive) = makeQueue(in: mode)
        loop.add(keepAlive, to: other)
        let log = EventLog()
        for index in 0..<3 { Task(executorPreference: executor) { log.append("\(index)") } }
        XCTAssertEqual(queue.count, 3)
        onePass(in: mode)
        XCTAssertEqual(log.all, [], "not scheduled: the source is in no mode yet")

        queue.schedule() // on the loop's thread: joins the mode at once
        XCTAssertFalse(queue.isOrphaned)
        onePass(in: other)
        XCTAssertEqual(log.all, [], "another mode leaves the jobs queued")
        XCTAssertEqual(queue.count, 3)
        onePass(in: mode)
        XCTAssertEqual(log.all, ["0", "1", "2"], "all of them, in order, in one pass")
        XCTAssertEqual(queue.count, 0)

        Task(executorPreference: executor) { log.append("3") }
        XCTAssertEqual(queue.count, 1)
        onePass(in: mode)
        XCTAssertEqual(log.all, ["0", "1", "2", "3"], "a later job signals the source again")
        keepAlive.invalidate()
    }

    func testAJobEnqueuedWhileABatchRunsWaitsForTheNextPass() {
        let mode = uniqueMode("batch")
        let (queue, executor, keepAlive) = makeQueue(in: mode)
        queue.schedule()
        let log = EventLog()
        Task(executorPreference: executor) {
            log.append("first")
            Task(executorPreference: executor) { log.append("queued by the first") }
        }
        Task(executorPreference: executor) { log.append("second") }
        onePass(in: mode)
        XCTAssertEqual(log.all, ["first", "second"], "the batch is what was queued when the pass took it")
        XCTAssertEqual(queue.count, 1)
        onePass(in: mode)
        XCTAssertEqual(log.all, ["first", "second", "queued by the first"])
        XCTAssertEqual(queue.count, 0)
        keepAlive.invalidate()
    }

    func testANestedRunStartedByAJobLeavesTheQueueAloneAndTheQueueGetsItsTurnAfterwards() {
        let mode = uniqueMode("nested")
        let (queue, executor, keepAlive) = makeQueue(in: mode)
        queue.schedule()
        let log = EventLog()
        Task(executorPreference: executor) {
            log.append("outer job")
            Task(executorPreference: executor) { log.append("inner job") }
            // The inner job's enqueue signalled the source: the nested pass performs it and
            // must leave the job queued, then the outer batch must signal it again.
            _ = ThreadRunLoop.current.run(mode: mode, timeout: .zero, returnAfterSourceHandled: false)
            log.append("nested run returned")
        }
        onePass(in: mode)
        XCTAssertEqual(log.all, ["outer job", "nested run returned"], "no job inside another job")
        XCTAssertEqual(queue.count, 1)
        onePass(in: mode)
        XCTAssertEqual(log.all, ["outer job", "nested run returned", "inner job"],
                       "the turn the nested run took is given back: the source was signalled again")
        keepAlive.invalidate()
    }

    func testScheduledFromAnotherThreadTheSourceJoinsItsModeAtTheLoopsNextPass() {
        let mode = uniqueMode("remote")
        let (queue, executor, keepAlive) = makeQueue(in: mode)
        let log = EventLog()
        Task(executorPreference: executor) { log.append("job") }
        TestThread { queue.schedule() }.join()
        XCTAssertFalse(queue.isOrphaned)
        XCTAssertEqual(log.all, [], "nothing runs before the loop's next pass")
        onePass(in: mode)
        XCTAssertEqual(log.all, ["job"], "the control action added the source before step 4")
        keepAlive.invalidate()
    }

    func testWhenTheLoopsThreadExitsTheQueuedAndLaterJobsRunInOrderOnASerialQueueOffThatThread() async {
        let made = LockedValue<(LoopJobQueue, LoopTaskExecutor)?>(nil)
        let log = EventLog()
        let tasks = LockedValue<[Task<Void, Never>]>([])
        TestThread {
            let loop = ThreadRunLoop.current
            let queue = LoopJobQueue(loop: loop, modes: [.default])
            let executor = LoopTaskExecutor(jobs: queue)
            queue.schedule()
            let queued = (0..<3).map { index in
                Task(executorPreference: executor) { log.append("\(index) on the loop's thread: \(loop.isOwnerThread)") }
            }
            tasks.withLock { $0 = queued }
            made.withLock { $0 = (queue, executor) }
            // The thread exits without running its loop: the teardown removes the source.
        }.join()
        guard let (queue, executor) = made.withLock({ $0 }) else { return XCTFail("no queue") }
        XCTAssertTrue(queue.isOrphaned)
        XCTAssertEqual(queue.count, 0, "the queued jobs moved to the fallback queue")
        let later = Task(executorPreference: executor) { log.append("3") }
        for task in tasks.withLock({ $0 }) + [later] { await task.value }
        XCTAssertEqual(log.all.map { String($0.prefix(1)) }, ["0", "1", "2", "3"], "in order, one at a time")
        XCTAssertFalse(log.all.contains { $0.hasSuffix("true") }, "not on the loop's thread: \(log.all)")
        queue.schedule()
        XCTAssertTrue(queue.isOrphaned, "an orphaned queue stays orphaned")
    }

    func testSchedulingOnALoopWhoseThreadHasExitedOrphansTheQueueAtOnce() async {
        let made = LockedValue<LoopJobQueue?>(nil)
        let thread = LoopThread()
        let loop = thread.loop
        made.withLock { $0 = LoopJobQueue(loop: loop, modes: [.default]) }
        thread.stop()
        let queue = made.withLock { $0! }
        XCTAssertFalse(queue.isOrphaned, "never scheduled, so the teardown did not see it")
        queue.schedule()
        XCTAssertTrue(queue.isOrphaned, "the loop refused the control action: its thread is gone")
        let ran = await Task(executorPreference: LoopTaskExecutor(jobs: queue)) { true }.value
        XCTAssertTrue(ran)
    }
}
