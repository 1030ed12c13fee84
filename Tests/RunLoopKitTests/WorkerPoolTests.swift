import Dispatch
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

final class WorkerPoolTests: XCTestCase {
    /// Which worker runs each request, by thread name.
    private func workerName() -> String { currentThreadName() }

    func testEveryWorkerChecksInWithItsOwnPortAtStartUp() throws {
        let pool = try WorkerPool(name: "checkin", count: 4) { message in
            LoopMessage(id: message.id, text: currentThreadName()) // answered on the port's own worker
        }
        XCTAssertEqual(pool.ports.count, 4)
        XCTAssertEqual(Set(pool.ports).count, 4, "a port of its own for each worker")
        XCTAssertEqual(pool.ports, pool.members.map { $0.port.remote }, "in worker order")
        for (index, port) in pool.ports.enumerated() {
            let reply = try port.sendRequest(LoopMessage(id: 1, text: "who?"))
            XCTAssertEqual(reply.text, "checkin-\(index)")
        }
        XCTAssertEqual(pool.workers.map(\.name), (0..<4).map { "checkin-\($0)" })
        pool.stop()
    }

    func testRoundRobinHandsWorkToEachWorkerInTurn() throws {
        let pool = try WorkerPool(name: "rr", count: 3, policy: .roundRobin)
        let names = try (0..<6).map { _ in try pool.performAndWait { currentThreadName() } }
        XCTAssertEqual(names, ["rr-0", "rr-1", "rr-2", "rr-0", "rr-1", "rr-2"])
        pool.stop()
    }

    func testLeastBusyHandsWorkToTheWorkersThatAreNotBusy() throws {
        let pool = try WorkerPool(name: "lb", count: 2, policy: .leastBusy)
        let gate = DispatchSemaphore(value: 0)
        let busy = DispatchSemaphore(value: 0)
        let blocked = SharedValue("")
        let blocking = try pool.perform {
            blocked.withLock { $0 = currentThreadName() }
            busy.signal()
            gate.wait()
        }
        waitOrFail(busy, "a worker to be busy")
        let names = try (0..<5).map { _ in try pool.performAndWait { currentThreadName() } }
        let other = blocked.withLock { $0 } == "lb-0" ? "lb-1" : "lb-0"
        XCTAssertEqual(names, Array(repeating: other, count: 5))
        gate.signal()
        XCTAssertEqual(blocking.waitUntilFinished(), .done)
        // Both idle again: ties are broken in turn, so both take work.
        let spread = try Set((0..<4).map { _ in try pool.performAndWait { currentThreadName() } })
        XCTAssertEqual(spread, ["lb-0", "lb-1"])
        pool.stop()
    }

    func testPerformAndWaitReturnsResultsAndErrorsAndPerformRunsOnTheWorkers() throws {
        struct Oops: Error, Equatable {}
        let pool = try WorkerPool(name: "sync", count: 2)
        XCTAssertEqual(try pool.performAndWait { 6 * 7 }, 42)
        XCTAssertThrowsError(try pool.performAndWait { throw Oops() }) { XCTAssertEqual($0 as? Oops, Oops()) }
        let done = DispatchSemaphore(value: 0)
        let names = SharedValue<[String]>([])
        for _ in 0..<4 {
            try pool.perform {
                names.withLock { $0.append(currentThreadName()) }
                done.signal()
            }
        }
        for _ in 0..<4 { waitOrFail(done, "the async work") }
        XCTAssertEqual(Set(names.withLock { $0 }), ["sync-0", "sync-1"])
        try pool.performAndWait {}
        pool.stop()
    }

    func testStopRunsQueuedWorkThenStopsAndJoinsEveryWorker() throws {
        let pool = try WorkerPool(name: "shutdown", count: 3)
        let log = EventLog()
        for index in 0..<9 { try pool.perform { log.append("\(index)") } }
        pool.stop()
        XCTAssertEqual(Set(log.all), Set((0..<9).map(String.init)), "the queued work ran")
        XCTAssertEqual(pool.state, .stopped)
        XCTAssertEqual(pool.workers.map(\.state), [.stopped, .stopped, .stopped])
        XCTAssertFalse(liveThreadNames().contains { $0.hasPrefix("shutdown-") })
        XCTAssertThrowsError(try pool.perform {}) { XCTAssertEqual($0 as? RunLoopError, .stopped) }
        XCTAssertThrowsError(try pool.performAndWait { 1 }) { XCTAssertEqual($0 as? RunLoopError, .stopped) }
        pool.stop() // twice: harmless
        XCTAssertEqual(pool.state, .stopped)
    }

    func testStopWithCancelCancelsQueuedWork() throws {
        let pool = try WorkerPool(name: "cancel", count: 1)
        let gate = try occupyWorker { _ = try pool.perform($0) }
        let queued = try pool.perform { XCTFail("cancelled work ran") }
        let stopper = TestThread { pool.stop(pending: .cancel) }
        XCTAssertEqual(queued.waitUntilFinished(), .cancelled)
        gate.signal()
        stopper.join()
        XCTAssertEqual(pool.state, .stopped)
        XCTAssertEqual(pool.members[0].outstanding.load(ordering: .relaxed), 0, "cancelled work is no longer counted")
    }

    func testStopFromOneOfThePoolsOwnWorkersAsksAllAndAnotherStopJoins() throws {
        let pool = try WorkerPool(name: "inner", count: 2)
        try pool.performAndWait { pool.stop() } // must not wait for itself
        XCTAssertEqual(pool.state, .stopping)
        XCTAssertThrowsError(try pool.perform {}) { XCTAssertEqual($0 as? RunLoopError, .stopped) }
        pool.stop()
        XCTAssertEqual(pool.state, .stopped)
        XCTAssertFalse(liveThreadNames().contains { $0.hasPrefix("inner-") })
    }

    func testACheckInTimeoutStopsTheWorkersThatStartedAndThrows() {
        XCTAssertThrowsError(try WorkerPool(name: "late", count: 2, checkInTimeout: .zero)) {
            XCTAssertEqual($0 as? PortError, .checkInTimedOut(expected: 2, checkedIn: 0))
        }
        XCTAssertFalse(liveThreadNames().contains { $0.hasPrefix("late-") })
    }

    func testAPoolCanBeMadeFromWorkRunningOnAnotherLoop() throws {
        let worker = try WorkerThread(name: "maker")
        let checkedIn = try worker.performAndWait {
            let pool = try WorkerPool(name: "made", count: 2) // the maker's loop runs nested, in a private mode
            defer { pool.stop() }
            return pool.ports.count
        }
        XCTAssertEqual(checkedIn, 2)
        worker.stop()
    }

    func testAPoolReleasedWithoutStopStopsItsWorkers() throws {
        let log = EventLog()
        do {
            let pool = try WorkerPool(name: "dropped", count: 2)
            for index in 0..<4 { try pool.perform { log.append("\(index)") } }
        }
        XCTAssertEqual(log.all.count, 4)
        XCTAssertFalse(liveThreadNames().contains { $0.hasPrefix("dropped-") })
    }

    func testSubmitAndADelayedPerformRunOnAWorkerAndAreRefusedOnceThePoolStopped() async throws {
        let pool = try WorkerPool(name: "verbs", count: 2)
        let workers = pool.workers
        let ranOn = try await pool.submit { workers.firstIndex { $0.isCurrent } }
        XCTAssertNotNil(ranOn, "ran on one of the pool's workers")
        let delayed = DispatchSemaphore(value: 0)
        let delayedOn = SharedValue<Int?>(nil)
        try pool.perform(after: .milliseconds(1)) {
            delayedOn.withLock { $0 = workers.firstIndex { $0.isCurrent } }
            delayed.signal()
        }
        XCTAssertEqual(delayed.wait(timeout: .now() + 10), .success)
        XCTAssertNotNil(delayedOn.withLock { $0 })
        pool.stop()
        do {
            _ = try await pool.submit { 1 }
            XCTFail("a stopped pool took work")
        } catch {
            XCTAssertEqual(error as? RunLoopError, .stopped)
        }
        XCTAssertThrowsError(try pool.perform(after: .zero) {}) { XCTAssertEqual($0 as? RunLoopError, .stopped) }
    }
}
