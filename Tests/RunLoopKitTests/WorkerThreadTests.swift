import CLinuxPoll
import Dispatch
import Foundation
import Glibc
@testable import RunLoopCore // for core internals it reads: a loop's delayed performs
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

final class WorkerThreadTests: XCTestCase {
    private struct Oops: Error, Equatable {}
    private static let scenarioVariable = "RUNLOOPKIT_WORKER_THREAD_SCENARIO"

    override func setUp() {
        super.setUp()
        guard childScenario(WorkerThreadTests.scenarioVariable) != nil else { return }
        endChild { WorkerThreadTests.startAWorkerWhoseWaitFails() }
    }

    // MARK: - Start

    func testInitReturnsARunningWorkerWhoseThreadIsNamedWithAtMost15Bytes() throws {
        let worker = try WorkerThread(name: "a-rather-long-worker-name")
        XCTAssertEqual(worker.state, .running)
        XCTAssertFalse(worker.isCurrent)
        XCTAssertEqual(try worker.performAndWait { currentThreadName() }, "a-rather-long-w")
        XCTAssertTrue(liveThreadNames().contains("a-rather-long-w"))
        XCTAssertEqual(NativeThread.truncated("abcdefghijklmnö"), "abcdefghijklmn", "cut on a character boundary")
        worker.stop()
    }

    func testSetUpRunsOnTheWorkerBeforeInitReturns() throws {
        let setUpThread = SharedValue<String?>(nil)
        let worker = try WorkerThread(name: "set-up") { setUpThread.withLock { $0 = currentThreadName() } }
        XCTAssertEqual(setUpThread.withLock { $0 }, "set-up")
        worker.stop()
    }

    func testWorkQueuedBeforeTheWorkersLoopFirstRunsStillRunsInOrder() throws {
        let gate = DispatchSemaphore(value: 0)
        // The set-up holds the thread before its loop's first run; init does not wait for it.
        let worker = try WorkerThread(startingNamed: "early-work") { gate.wait() }
        XCTAssertEqual(worker.state, .running, "takes work before its thread is ready")
        XCTAssertFalse(worker.isCurrent)
        let log = EventLog()
        for index in 0..<50 { try worker.perform { log.append(worker.isCurrent ? "\(index)" : "wrong thread") } }
        let answer = SharedValue<Int?>(nil)
        let caller = TestThread { answer.withLock { $0 = try? worker.performAndWait { 42 } } }
        gate.signal()
        caller.join()
        try worker.performAndWait {}
        XCTAssertEqual(log.all, (0..<50).map(String.init))
        XCTAssertEqual(answer.withLock { $0 }, 42)
        worker.stop()
    }

    func testInitWithASetUpReturnsOnlyAfterTheSetUpRanEvenWhenItIsSlow() throws {
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = SharedValue(false)
        let releaser = TestThread {
            started.wait()
            release.signal() // only once the set-up is under way
        }
        let worker = try WorkerThread(name: "slow-set-up") {
            started.signal()
            release.wait()
            finished.withLock { $0 = true }
        }
        XCTAssertTrue(finished.withLock { $0 }, "init returned before its set-up finished")
        releaser.join()
        worker.stop()
    }

    // MARK: - Perform

    func testWorkFromAnotherThreadRunsOnTheWorkerInFIFOOrder() throws {
        let worker = try WorkerThread(name: "fifo")
        let log = EventLog()
        for index in 0..<200 {
            try worker.perform { log.append(worker.isCurrent ? "\(index)" : "wrong thread") }
        }
        try worker.performAndWait {} // the requests before it have run
        XCTAssertEqual(log.all, (0..<200).map(String.init))
        worker.stop()
    }

    func testPerformAndWaitReturnsTheResultAndRethrowsTheClosuresError() throws {
        let worker = try WorkerThread(name: "sync")
        XCTAssertEqual(try worker.performAndWait { worker.isCurrent ? 42 : -1 }, 42)
        XCTAssertThrowsError(try worker.performAndWait { throw Oops() }) { XCTAssertEqual($0 as? Oops, Oops()) }
        XCTAssertEqual(worker.state, .running, "a throwing closure does not harm the worker")
        worker.stop()
    }

    func testPerformAndWaitBlocksTheCallerUntilTheWorkRan() throws {
        let worker = try WorkerThread(name: "wait")
        let gate = DispatchSemaphore(value: 0)
        try worker.perform { gate.wait() } // keeps the worker busy: the next request must wait
        let ran = SharedValue(false)
        let caller = TestThread {
            let returned: Void? = try? worker.performAndWait { ran.withLock { $0 = true } }
            XCTAssertNotNil(returned)
            XCTAssertTrue(ran.withLock { $0 }, "the caller returns only once the work ran")
        }
        XCTAssertFalse(ran.withLock { $0 })
        gate.signal()
        caller.join()
        let request = try worker.perform {}
        try worker.performAndWait {}
        XCTAssertEqual(request.state, .done)
        worker.stop()
    }

    func testPerformAndWaitOnTheWorkersOwnThreadRunsAtOnceWhilePerformIsQueued() throws {
        let worker = try WorkerThread(name: "own-thread")
        let log = EventLog()
        try worker.performAndWait {
            try worker.perform { log.append("queued") }
            try worker.performAndWait { log.append("at once") }
            XCTAssertEqual(try worker.performAndWait { "nested sync" }, "nested sync")
            log.append("after")
        }
        try worker.performAndWait {}
        XCTAssertEqual(log.all, ["at once", "after", "queued"])
        worker.stop()
    }

    func testWorkForAnotherModeWaitsUntilWorkOnTheWorkerRunsTheLoopInThatMode() throws {
        let worker = try WorkerThread(name: "modes") {
            // The private mode needs an item of its own for a run in it to start.
            ThreadRunLoop.current.add(LoopTimer(after: .seconds(1000)) { _ in }, to: "private")
        }
        let log = EventLog()
        try worker.perform(inModes: ["private"]) { log.append("private") }
        try worker.performAndWait(inModes: [.default]) { log.append("default") }
        XCTAssertEqual(log.all, ["default"], "the worker runs its default mode")
        let result = try worker.performAndWait {
            ThreadRunLoop.current.run(mode: "private", timeout: .seconds(10), returnAfterSourceHandled: true)
        }
        XCTAssertEqual(result, .handledSource)
        XCTAssertEqual(log.all, ["default", "private"])
        worker.stop()
    }

    // MARK: - Delayed performs

    func testADelayedPerformFromAnotherThreadRunsOnTheWorkerAfterItsDelay() throws {
        let worker = try WorkerThread(name: "delayed")
        let ran = DispatchSemaphore(value: 0)
        let observed = SharedValue<(Duration, Bool)?>(nil)
        let start = Deadline.now()
        try worker.perform(after: .milliseconds(50)) {
            observed.withLock { $0 = (Deadline.now() - start, worker.isCurrent) }
            ran.signal()
        }
        waitOrFail(ran, "the delayed perform")
        let (elapsed, onWorker) = try XCTUnwrap(observed.withLock { $0 })
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(50))
        XCTAssertTrue(onWorker)
        worker.stop()
    }

    func testADelayedPerformOnTheWorkersOwnThreadIsScheduledOnItsLoop() throws {
        let worker = try WorkerThread(name: "delayed-own")
        let ran = DispatchSemaphore(value: 0)
        try worker.performAndWait {
            try worker.perform(after: .milliseconds(10)) { ran.signal() }
            let scheduled = worker.loop.queueLock.withLock { worker.loop.delayedRequests.count }
            XCTAssertEqual(scheduled, 1, "scheduled at once, as a timer")
        }
        waitOrFail(ran, "the delayed perform")
        worker.stop()
    }

    func testCancellingByTagKeepsOnlyThoseDelayedPerformsFromRunning() throws {
        let worker = try WorkerThread(name: "cancel")
        let log = EventLog()
        let done = DispatchSemaphore(value: 0)
        try worker.perform(after: .milliseconds(100), tag: "cancelled") { log.append("cancelled") }
        try worker.perform(after: .milliseconds(150), tag: "kept") { log.append("kept") }
        try worker.performAndWait {} // the first two are scheduled: cancel them as timers
        let gate = DispatchSemaphore(value: 0)
        try worker.perform { gate.wait() } // and this one while its hand-over is still queued
        try worker.perform(after: .milliseconds(100), tag: "cancelled") { log.append("cancelled too") }
        XCTAssertEqual(worker.cancelPerformRequests(tagged: "cancelled"), 2, "one timer and one hand-over")
        gate.signal()
        // Timers fire in date order: once this one ran, the cancelled ones would have.
        try worker.perform(after: .milliseconds(200)) { done.signal() }
        waitOrFail(done, "the last delayed perform")
        XCTAssertEqual(log.all, ["kept"])
        XCTAssertEqual(worker.cancelPerformRequests(), 0, "nothing left to cancel")
        worker.stop()
    }

    func testCancellingQueuedWorkWakesItsWaiterWithCancelled() throws {
        let worker = try WorkerThread(name: "cancel-wait")
        let gate = try occupyWorker { _ = try worker.perform($0) }
        let queued = try worker.perform(tag: "job") { XCTFail("cancelled work ran") }
        XCTAssertEqual(worker.cancelPerformRequests(tagged: "job"), 1)
        XCTAssertEqual(queued.waitUntilFinished(), .cancelled, "the waiter woke: its work will never run")
        XCTAssertEqual(worker.control.cancellationError, .cancelled)
        gate.signal()
        worker.stop()
    }

    func testCancellingReachesARequestTakenInTheBatchInProgress() throws {
        let worker = try WorkerThread(name: "cancel-batch")
        let gates = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let busy = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        try worker.perform { busy.0.signal(); gates.0.wait() }
        waitOrFail(busy.0, "the first work")
        // Both queued while the worker is busy: its next pass takes them in one batch.
        try worker.perform { busy.1.signal(); gates.1.wait() }
        let taken = try worker.perform(tag: "x") { XCTFail("cancelled work ran") }
        gates.0.signal()
        waitOrFail(busy.1, "the second work")
        XCTAssertEqual(worker.cancelPerformRequests(tagged: "x"), 1, "taken but not yet run: still cancellable")
        gates.1.signal()
        try worker.performAndWait {}
        XCTAssertEqual(taken.state, .cancelled)
        worker.stop()
    }

    func testCancelledDelayedPerformsAreNotKeptByTheWorkersLoop() throws {
        let worker = try WorkerThread(name: "cancel-many")
        let kept = try worker.performAndWait {
            for _ in 0..<1000 {
                try worker.perform(after: .seconds(3600), tag: "retry") {}
                worker.cancelPerformRequests(tagged: "retry")
                ThreadRunLoop.current.schedulePerform(after: .seconds(3600)) {}.cancel()
            }
            return worker.loop.queueLock.withLock { worker.loop.delayedRequests.count }
        }
        XCTAssertLessThanOrEqual(kept, 1, "at most the last one, cancelled directly, until the next perform(after:)")
        worker.stop()
    }

    // MARK: - Release

    func testAWorkerReleasedWithoutStopRunsItsQueuedWorkAndExits() throws {
        let log = EventLog()
        do {
            let worker = try WorkerThread(name: "released")
            let gate = DispatchSemaphore(value: 0)
            try worker.perform { gate.wait() }
            for index in 0..<3 { try worker.perform { log.append("\(index)") } }
            gate.signal()
        }
        XCTAssertEqual(log.all, ["0", "1", "2"])
        XCTAssertFalse(liveThreadNames().contains("released"), "deinit joined the thread")
    }

    func testAWorkerReleasedOnItsOwnThreadStillExitsAndTearsDownItsLoop() throws {
        let lastRequest = SharedValue<PerformRequest?>(nil)
        let released = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        do {
            let worker = try WorkerThread(name: "self-release")
            // Never runs (no run in that mode): cancelled by the loop's teardown at thread exit.
            lastRequest.withLock { $0 = worker.loop.perform(inModes: ["never"]) {} }
            try worker.perform { [worker] in
                gate.wait() // until this closure holds the last reference, released on the worker's thread
                _ = worker
                released.signal()
            }
        }
        gate.signal()
        waitOrFail(released, "the last work")
        let request = try XCTUnwrap(lastRequest.withLock { $0 })
        XCTAssertEqual(request.waitUntilFinished(), .cancelled, "the thread exited and tore its loop down")
    }

    // MARK: - Leaks

    /// Seed 003's experiment: threads started and stopped in a loop must not leak. The
    /// count is `RUNLOOPKIT_LEAK_CYCLES` (10,000 by default), after a warm-up.
    func testTenThousandStartPerformStopCyclesLeakNoThreadsDescriptorsOrMemory() throws {
        let cycles = ProcessInfo.processInfo.environment["RUNLOOPKIT_LEAK_CYCLES"].flatMap { Int($0) } ?? 10_000
        func cycle() throws {
            let worker = try WorkerThread(name: "leak-cycle")
            try worker.performAndWait {}
            worker.stop()
        }
        for _ in 0..<300 { try cycle() } // warm-up: caches of the allocator, the runtime and glibc's stacks
        let before = ProcessResources.measure()
        XCTAssertTrue(before.threads > 0 && before.descriptors > 0 && before.residentKilobytes > 0, "\(before)")
        let start = Deadline.now()
        for _ in 0..<cycles { try cycle() }
        let elapsed = Deadline.now() - start
        let threadsAfter = liveThreads(settlingAtMost: before.threads)
        let after = ProcessResources.measure()
        print("\(cycles) cycles in \(elapsed): before \(before); after \(after); "
              + "resident growth \(after.residentKilobytes - before.residentKilobytes) kB")
        XCTAssertLessThanOrEqual(threadsAfter, before.threads, "no thread may outlive its stop")
        XCTAssertLessThanOrEqual(after.descriptors, before.descriptors, "every loop's descriptors are closed")
        if !runningUnderSanitizer {
            // 4 MB over 10,000 cycles: a leak of 400 bytes a cycle fails it (0-1 MB measured).
            let bound = 4 * 1024 * cycles / 10_000
            XCTAssertLessThan(after.residentKilobytes - before.residentKilobytes, bound, "resident memory within \(bound) kB")
        }
        XCTAssertFalse(liveThreadNames().contains("leak-cycle"))
    }

    // MARK: - A failed wait

    /// A worker whose poll set's wait the kernel fails (`epoll_pwait2` made to fail with
    /// `EBADF` by a seccomp filter, in a child process): its resident run ends at the
    /// failure (`RunResult.failed`, `RunResultTests`) rather than spinning on it, its thread
    /// exits, and work handed to it fails instead of waiting forever.
    func testAWorkerWhoseWaitTheKernelFailsEndsItsThreadAndLaterWorkFailsNotWaits() throws {
        let report = try expectPassingChild(self, test: #function, variable: WorkerThreadTests.scenarioVariable, scenario: "EBADF")
        XCTAssertTrue(report.contains("PASS the worker ended"), "the child's report:\n\(report)")
    }

    /// In the child: a worker started under the filter, given a port so that it sleeps in
    /// its poll set.
    private static func startAWorkerWhoseWaitFails() -> Bool {
        guard clinux_deny_system_call_for_tests(clinux_epoll_pwait2_number(), EBADF) == 0 else {
            return childReport(false, "seccomp is not available here: errno \(errno)")
        }
        // A worker started now inherits the filter.
        let worker: WorkerThread
        do {
            worker = try WorkerThread(name: "failing-wait")
            try worker.performAndWait {
                let port = try LocalPort { _ in nil }
                ThreadRunLoop.current.add(port, to: .default) // its first sleep in the poll set fails
            }
        } catch {
            return childReport(false, "the worker could not be set up: \(error)")
        }
        do {
            try worker.performAndWait {}
            return childReport(false, "work ran on a worker whose loop failed")
        } catch {
            print("the worker's later work: \(error)")
        }
        worker.stop()
        return childReport(true, "the worker ended")
    }
}
