import Dispatch
import Glibc
@testable import RunLoopCore
@testable import RunLoopKit
import RunLoopSystem
import RunLoopTestSupport
import RunLoopWire
import RunLoopZMQ
import XCTest

/// A port invalidated before it read the requests queued for it answers each with a no reply
/// as it closes, so their requesters fail at once with `PortError.noReply`, never at their
/// receive timeouts: a destroyed Mach port's queued messages send their send-once
/// notifications.
final class QueuedRequestsAtCloseTests: XCTestCase {
    /// A server thread whose port counts what its handler sees.
    private func server(name: String? = nil, handled: SharedValue<Int>) -> (LoopThread, LocalPort) {
        let served = SharedValue<LocalPort?>(nil)
        let thread = LoopThread { loop in
            let port = try! LocalPort(name: name, handler: { _ in
                handled.withLock { $0 += 1 }
                return nil
            })
            loop.add(port, to: .default)
            served.withLock { $0 = port }
        }
        return (thread, served.withLock { $0! })
    }

    /// Holds the server's thread (it reads nothing) until `gate` is signalled; then, on that
    /// thread, waits until a message is queued for `port` and invalidates the port before
    /// reading it. Returns once the thread is held.
    private func invalidateBeforeReading(_ port: LocalPort, on thread: LoopThread, after gate: DispatchSemaphore,
                                         invalidated: DispatchSemaphore) {
        let held = DispatchSemaphore(value: 0)
        thread.loop.perform {
            held.signal()
            gate.wait()
            let deadline = Deadline.after(.seconds(10))
            while !port.hasPendingMessage(), Deadline.now() < deadline { sched_yield() }
            port.invalidate() // on the owner thread: closed now, nothing read
            invalidated.signal()
        }
        waitOrFail(held, "the server's thread held")
    }

    func testRequestsQueuedAtAnInProcessPortWhenItIsInvalidatedFailAtOnceWithNoReply() async throws {
        let handled = SharedValue(0)
        let (thread, port) = server(handled: handled)
        let remote = port.remote
        let gate = DispatchSemaphore(value: 0)
        let invalidated = DispatchSemaphore(value: 0)
        invalidateBeforeReading(port, on: thread, after: gate, invalidated: invalidated)
        let requester = try AsyncRequester.shared.get()
        let count = 50
        let timeout = Duration.seconds(60)
        try await withThrowingTaskGroup(of: (PortError?, Duration).self) { group in
            for _ in 0..<count {
                group.addTask {
                    let start = Deadline.now()
                    do {
                        _ = try await remote.request(LoopMessage(id: 3), receiveTimeout: timeout)
                        return (nil, Deadline.now() - start)
                    } catch {
                        return (error as? PortError, Deadline.now() - start)
                    }
                }
            }
            // All sent, so all queued at the port (an inproc send is in the port's queue once it returns).
            XCTAssertTrue(waitUntil { requester.waitingCount == count })
            gate.signal()
            var noReplies = 0
            for try await (error, elapsed) in group {
                XCTAssertEqual(error, .noReply(remote.address))
                XCTAssertLessThan(elapsed, .seconds(5), "at once, not at the 60 s receive timeout")
                if error == .noReply(remote.address) { noReplies += 1 }
            }
            XCTAssertEqual(noReplies, count)
        }
        waitOrFail(invalidated, "the invalidation")
        XCTAssertEqual(handled.withLock { $0 }, 0, "the handler read none of them")
        XCTAssertEqual(requester.waitingCount, 0)
        thread.stop()
    }

    func testABlockingRequestQueuedAtAPortWhenItIsInvalidatedFailsAtOnceWithNoReply() throws {
        let handled = SharedValue(0)
        let (thread, port) = server(handled: handled)
        let remote = port.remote
        let gate = DispatchSemaphore(value: 0)
        let invalidated = DispatchSemaphore(value: 0)
        invalidateBeforeReading(port, on: thread, after: gate, invalidated: invalidated)
        gate.signal() // the server's thread waits for the request, then invalidates the port
        let start = Deadline.now()
        XCTAssertThrowsError(try remote.sendRequest(LoopMessage(id: 4), receiveTimeout: .seconds(60))) { error in
            XCTAssertEqual(error as? PortError, .noReply(remote.address))
        }
        XCTAssertLessThan(Deadline.now() - start, .seconds(5), "at once, not at the 60 s receive timeout")
        waitOrFail(invalidated, "the invalidation")
        XCTAssertEqual(handled.withLock { $0 }, 0)
        thread.stop()
    }

    /// On a plain thread that never runs its loop: opens a port, waits until a message is
    /// queued for it, then exits without reading it. With `keeper`, the port outlives the
    /// thread's closure (its loop's teardown closes it); without, it is freed as the closure
    /// ends (its deinit closes it). Returns once the port's address is known.
    private func portOnAThreadThatExitsBeforeReading(keptBy keeper: SharedValue<LocalPort?>?,
                                                     handled: SharedValue<Int>) -> (TestThread, RemotePort) {
        let published = DispatchSemaphore(value: 0)
        let remote = SharedValue<RemotePort?>(nil)
        let thread = TestThread {
            let port = try! LocalPort(handler: { _ in
                handled.withLock { $0 += 1 }
                return nil
            })
            remote.withLock { $0 = port.remote }
            keeper?.withLock { $0 = port }
            published.signal()
            let deadline = Deadline.after(.seconds(10))
            while !port.hasPendingMessage(), Deadline.now() < deadline { sched_yield() }
        }
        waitOrFail(published, "the port opened")
        return (thread, remote.withLock { $0! })
    }

    func testARequestQueuedAtAPortWhoseThreadExitsFailsAtOnceWithNoReply() throws {
        for kept in [true, false] {
            let handled = SharedValue(0)
            let keeper = SharedValue<LocalPort?>(nil)
            let (thread, remote) = portOnAThreadThatExitsBeforeReading(keptBy: kept ? keeper : nil, handled: handled)
            let start = Deadline.now()
            XCTAssertThrowsError(try remote.sendRequest(LoopMessage(id: 7), receiveTimeout: .seconds(60))) { error in
                XCTAssertEqual(error as? PortError, .noReply(remote.address), kept ? "closed by its loop's teardown" : "freed")
            }
            XCTAssertLessThan(Deadline.now() - start, .seconds(5), "at once, not at the 60 s receive timeout")
            thread.join()
            XCTAssertEqual(handled.withLock { $0 }, 0)
            XCTAssertEqual(keeper.withLock { $0?.isValid }, kept ? false : nil)
            keeper.withLock { $0 = nil }
        }
    }

    func testARequestQueuedAtANamedPortOverIPCWhenItIsInvalidatedIsAnsweredWithANoReply() throws {
        let handled = SharedValue(0)
        let name = "close-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let (thread, port) = server(name: name, handled: handled)
        let address = port.remote.address.rawValue
        XCTAssertTrue(address.hasPrefix("ipc://"))
        let gate = DispatchSemaphore(value: 0)
        let invalidated = DispatchSemaphore(value: 0)
        invalidateBeforeReading(port, on: thread, after: gate, invalidated: invalidated)
        // A foreign requester over ipc: a raw DEALER speaking the wire format.
        let dealer = try ZMQSocket(type: .dealer)
        try dealer.connect(address)
        XCTAssertTrue(try dealer.send(LoopMessage(id: 5), as: .request, correlationID: 0x1236, dontWait: false))
        XCTAssertTrue(try dealer.send(LoopMessage(id: 6), as: .message, dontWait: false))
        gate.signal()
        waitOrFail(invalidated, "the invalidation")
        XCTAssertTrue(try dealer.poll(for: .pollIn, timeout: .seconds(5)).contains(.pollIn), "answered before the port's socket closed")
        let answer = try WireCodec.decode(XCTUnwrap(dealer.receive(dontWait: true)))
        XCTAssertEqual(answer.kind, .noReply)
        XCTAssertEqual(answer.correlationID, 0x1236)
        XCTAssertEqual(answer.messageID, 5)
        XCTAssertFalse(try dealer.poll(for: .pollIn, timeout: .milliseconds(200)).contains(.pollIn),
                       "a plain message queued is discarded unanswered")
        XCTAssertEqual(handled.withLock { $0 }, 0)
        thread.stop()
    }
}
