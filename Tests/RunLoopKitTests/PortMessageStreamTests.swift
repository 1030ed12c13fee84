import Dispatch
@testable import RunLoopCore // for core internals it reads: a port's paused registration
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// An actor pinned to a worker that consumes a port of the worker's with `for await`.
private actor Inbox {
    let worker: WorkerThread
    private var stream: PortMessageStream?
    private(set) var received: [Int32] = []

    init(_ worker: WorkerThread) { self.worker = worker }
    nonisolated var unownedExecutor: UnownedSerialExecutor { worker.executor.asUnownedSerialExecutor() }

    /// Creates the port on the worker's thread (this actor's), in its loop's default mode.
    func open() throws -> RemotePort {
        let port = try LocalPort()
        ThreadRunLoop.current.add(port, to: .default)
        stream = port.messages(bufferingPolicy: .bounded(4))
        return port.remote
    }

    /// Takes messages until the stream ends; signals `progress` for each.
    func consumeAll(progress: DispatchSemaphore) async -> [Int32] {
        guard let stream else { return [] }
        for await message in stream {
            received.append(message.id)
            progress.signal()
        }
        return received
    }
}

final class PortMessageStreamTests: XCTestCase {
    /// A private mode of the test thread's loop, run by hand so that delivery is deterministic.
    private let mode = LoopMode("stream-test")
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    /// Makes one pass in `mode` that delivers one message; true if one was.
    private func deliverOne() -> Bool { loop.run(mode: mode, before: .after(.seconds(10))) }

    /// A pass in `mode` that does not sleep: runs the control actions queued for the loop.
    private func passWithoutSleeping() { _ = loop.run(mode: mode, timeout: .zero, returnAfterSourceHandled: false) }

    /// Collects the stream on a task until it ends (or `limit` messages), and signals `done`.
    private func collect(_ stream: PortMessageStream, limit: Int = .max, into ids: SharedValue<[Int32]>,
                         done: DispatchSemaphore) -> Task<Void, Never> {
        Task {
            for await message in stream {
                let count = ids.withLock { $0.append(message.id); return $0.count }
                if count == limit { break }
            }
            done.signal()
        }
    }

    // MARK: - Flow

    func testMessagesArriveInTheOrderThePortReceivedThem() throws {
        let port = try LocalPort()
        loop.add(port, to: mode)
        let stream = port.messages()
        for id in Int32(1)...5 { try port.send(LoopMessage(id: id)) }
        for _ in 1...5 { XCTAssertTrue(deliverOne()) }
        port.invalidate()
        let (ids, done) = (SharedValue<[Int32]>([]), DispatchSemaphore(value: 0))
        _ = collect(stream, into: ids, done: done)
        waitOrFail(done, "the stream to end")
        XCTAssertEqual(ids.withLock { $0 }, [1, 2, 3, 4, 5], "the buffered messages, then the end")
    }

    func testABurstOfTenThousandMessagesThroughABufferOfEightArrivesInOrderWithNoneDropped() throws {
        let holder = SharedValue<LocalPort?>(nil)
        let worker = try WorkerThread(name: "burst") {
            let port = try! LocalPort()
            ThreadRunLoop.current.add(port, to: .default)
            holder.withLock { $0 = port }
        }
        let port = try XCTUnwrap(holder.withLock { $0 })
        let stream = port.messages(bufferingPolicy: .bounded(8)) // from another thread: installed next pass
        let count = 10_000
        let (ids, done) = (SharedValue<[Int32]>([]), DispatchSemaphore(value: 0))
        _ = collect(stream, limit: count, into: ids, done: done)
        let sendFailures = SharedValue(0)
        let sender = TestThread {
            for id in 0..<Int32(count) {
                do { try port.send(LoopMessage(id: id), timeout: .seconds(30)) } catch { sendFailures.withLock { $0 += 1 } }
            }
        }
        sender.join()
        waitOrFail(done, seconds: 60, "ten thousand messages")
        XCTAssertEqual(sendFailures.withLock { $0 }, 0)
        XCTAssertEqual(ids.withLock { $0 }, (0..<Int32(count)).map { $0 }, "all of them, in order")
        XCTAssertEqual(port.statistics.messagesDropped, 0)
        let (pauses, mostBuffered) = stream.buffer.statistics
        XCTAssertLessThanOrEqual(mostBuffered, 8, "the buffer never holds more than its capacity")
        print("burst through a buffer of 8: paused \(pauses) times")
        worker.stop()
    }

    // MARK: - Back-pressure

    func testWhileTheBufferIsFullThePortIsPausedInItsModesAndSendersWaitUntilTheConsumerCatchesUp() throws {
        let port = try LocalPort(receiveHighWaterMark: 10)
        loop.add(port, to: mode)
        let stream = port.messages(bufferingPolicy: .bounded(4))
        // Nobody consumes yet: four messages fill the buffer, the fourth pauses the port.
        for id in Int32(0)..<4 { try port.send(LoopMessage(id: id)) }
        for _ in 0..<4 { XCTAssertTrue(deliverOne()) }
        XCTAssertTrue(loop.contains(port, in: mode), "still in its mode while the buffer is full")
        XCTAssertTrue(loop.isPaused(port), "paused while the buffer is full")
        XCTAssertEqual(loop.run(mode: mode, timeout: .zero, returnAfterSourceHandled: true), .timedOut,
                       "the paused port keeps the mode from looking empty (.finished) and delivers nothing")
        // The rest wait in ZeroMQ's queue, then the sender waits: it fails at its deadline.
        // What may be queued is bounded (docs/reliability.md, "Back-pressure"): the port's
        // receive high-water mark plus the sending thread's socket's 10,000; a sender that
        // gets past that bound was never stopped, and that is this test's failure.
        let bound = 4 + 10 + Int32(ThreadPortState.sendHighWaterMark)
        var sent: Int32 = 4
        var firstRefused: Int32?
        while firstRefused == nil && sent <= bound + 100 {
            do {
                try port.send(LoopMessage(id: sent), timeout: .milliseconds(20))
                sent += 1
            } catch {
                XCTAssertEqual(error, .sendTimedOut(port.remote.address))
                firstRefused = sent
            }
        }
        guard let firstRefused else {
            port.invalidate()
            return XCTFail("back-pressure never stopped the sender: \(sent) messages accepted, the bound is \(bound)")
        }
        XCTAssertLessThanOrEqual(firstRefused, bound, "stopped within the documented bound")
        XCTAssertGreaterThan(firstRefused, 10, "the queue and the sender's own buffer took some first")
        XCTAssertEqual(port.statistics.messagesReceived, 4, "nothing was taken from the port meanwhile")
        // The consumer catches up: the port comes back, and every message sent arrives, in order.
        let (ids, done) = (SharedValue<[Int32]>([]), DispatchSemaphore(value: 0))
        _ = collect(stream, limit: Int(firstRefused), into: ids, done: done)
        while port.statistics.messagesReceived < Int(firstRefused) {
            // Sleeps until the consumer asks for the port back, or delivers one message.
            _ = loop.run(mode: mode, before: .after(.seconds(10)))
        }
        waitOrFail(done, "the consumer")
        XCTAssertEqual(ids.withLock { $0 }, Array(0..<firstRefused))
        XCTAssertEqual(port.statistics.messagesDropped, 0)
        XCTAssertGreaterThan(stream.buffer.statistics.pauses, 1)
        port.invalidate()
    }

    // MARK: - End

    func testTheStreamEndsAfterItsBufferedMessagesOnceThePortIsInvalidatedFromAnyThread() throws {
        let holder = SharedValue<LocalPort?>(nil)
        let thread = LoopThread { loop in
            let port = try! LocalPort()
            loop.add(port, to: .default)
            holder.withLock { $0 = port }
        }
        let port = try XCTUnwrap(holder.withLock { $0 })
        let stream = port.messages()
        let (ids, done) = (SharedValue<[Int32]>([]), DispatchSemaphore(value: 0))
        _ = collect(stream, into: ids, done: done)
        try port.send(LoopMessage(id: 1))
        try thread.loop.performAndWait {} // not a proof of delivery: the end must come either way
        port.invalidate()
        waitOrFail(done, "the stream to end once the port is invalidated")
        XCTAssertTrue([[], [1]].contains(ids.withLock { $0 }))
        thread.stop()
    }

    func testBreakingOutOfTheLoopEndsTheStreamAndTheLaterMessagesAreDroppedAsForNoHandler() throws {
        let port = try LocalPort()
        loop.add(port, to: mode)
        let stream = port.messages()
        try port.send(LoopMessage(id: 1))
        try port.send(LoopMessage(id: 2))
        XCTAssertTrue(deliverOne())
        XCTAssertTrue(deliverOne())
        let (ids, done) = (SharedValue<[Int32]>([]), DispatchSemaphore(value: 0))
        _ = collect(stream, limit: 1, into: ids, done: done) // takes one, then breaks
        waitOrFail(done, "the consumer to stop")
        XCTAssertEqual(ids.withLock { $0 }, [1])
        XCTAssertNotNil(port.handler)
        passWithoutSleeping() // the detach, a control action
        XCTAssertNil(port.handler, "the stream's handler is removed")
        try port.send(LoopMessage(id: 3))
        XCTAssertTrue(deliverOne())
        XCTAssertEqual(port.statistics.messagesDropped, 1, "dropped (and logged) as for a port without a handler")
        port.invalidate()
    }

    func testCancellingTheConsumingTaskEndsItsWaitWithNil() throws {
        let port = try LocalPort()
        loop.add(port, to: mode)
        let stream = port.messages()
        let ended = DispatchSemaphore(value: 0)
        let result = SharedValue<LoopMessage??>(nil)
        let consumer = Task.immediate { // waits in next() when `immediate` returns
            var iterator = stream.makeAsyncIterator()
            let next = await iterator.next()
            result.withLock { $0 = .some(next) }
            ended.signal()
        }
        consumer.cancel()
        waitOrFail(ended, "the cancelled consumer")
        XCTAssertEqual(result.withLock { $0 }, .some(nil))
        passWithoutSleeping()
        XCTAssertNil(port.handler)
        port.invalidate()
    }

    func testAnotherHandlerTakingThePortOverEndsTheStream() throws {
        let port = try LocalPort()
        loop.add(port, to: mode)
        let first = port.messages()
        let second = port.messages() // replaces the first's handler
        let (ids, done) = (SharedValue<[Int32]>([]), DispatchSemaphore(value: 0))
        _ = collect(first, into: ids, done: done)
        waitOrFail(done, "the first stream to end")
        try port.send(LoopMessage(id: 9))
        XCTAssertTrue(deliverOne())
        let (secondIDs, received) = (SharedValue<[Int32]>([]), DispatchSemaphore(value: 0))
        _ = collect(second, limit: 1, into: secondIDs, done: received)
        waitOrFail(received, "the second stream's message")
        XCTAssertEqual(secondIDs.withLock { $0 }, [9])
        XCTAssertEqual(ids.withLock { $0 }, [])
        port.invalidate()
    }

    func testAnActorConsumingItsWorkersPortEndsQuietlyWhenTheWorkerStops() async throws {
        let worker = try WorkerThread(name: "inbox")
        let inbox = Inbox(worker)
        let remote = try await inbox.open()
        let progress = DispatchSemaphore(value: 0)
        let consumer = Task { await inbox.consumeAll(progress: progress) }
        for id in Int32(1)...5 { try remote.send(LoopMessage(id: id)) }
        for _ in 1...5 { waitOrFail(progress, "a message on the actor") }
        // The worker's teardown closes the port; the consumer, woken on the actor's executor
        // as the thread exits, sees the end of the stream.
        let stopper = TestThread { worker.stop() }
        let received = await consumer.value
        stopper.join()
        XCTAssertEqual(received, [1, 2, 3, 4, 5])
        XCTAssertTrue(worker.executor.loopThreadHasExited)
    }
}
