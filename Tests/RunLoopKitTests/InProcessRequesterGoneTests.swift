import Dispatch
import Glibc
@testable import RunLoopCore
@testable import RunLoopKit
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// A requester thread of this process (inproc) that goes while a server holds the rights of
/// its requests: the server's rights report cancelled, as when a requester process dies
/// (`PortClientGoneTests`), though libzmq reports nothing of an inproc connection's end.
///
/// A requester thread cannot exit while it waits for a reply, and gives its request up with
/// a cancel; what these tests make happen is the cancel lost (the connection full: the
/// server reads nothing) and the thread then gone. The requester's loop fills its own
/// connection from a timer in the mode it waits for its reply in.
final class InProcessRequesterGoneTests: XCTestCase {
    private typealias KeptRights = SharedValue<[(box: ReplyRightBox, cancelledOnArrival: Bool)]>

    /// A server thread whose deferring handler keeps each request's right in `kept` (with
    /// whether it was cancelled when it came; `cancellations` counts its cancellation
    /// handler's runs), signals `entered`, and, if `holdInHandler`, then waits for `gate`
    /// before it reads anything more.
    private func server(holdInHandler: Bool) -> (thread: LoopThread, port: LocalPort, gate: DispatchSemaphore,
                                                 entered: DispatchSemaphore, kept: KeptRights,
                                                 cancellations: SharedValue<Int>) {
        let gate = DispatchSemaphore(value: 0)
        let entered = DispatchSemaphore(value: 0)
        let kept = KeptRights([])
        let cancellations = SharedValue(0)
        let served = SharedValue<LocalPort?>(nil)
        let thread = LoopThread { loop in
            let port = try! LocalPort(receiveHighWaterMark: 10, handling: .deferring { message, right in
                guard let right else { return } // the requester's filler messages
                let cancelledOnArrival = right.isCancelled
                right.onCancel { cancellations.withLock { $0 += 1 } }
                let box = ReplyRightBox(right)
                kept.withLock { $0.append((box, cancelledOnArrival)) }
                entered.signal()
                if holdInHandler { gate.wait() }
            })
            loop.add(port, to: .default)
            served.withLock { $0 = port }
        }
        return (thread, served.withLock { $0! }, gate, entered, kept, cancellations)
    }

    /// On a worker thread: a request to `remote` given up after 300 ms, whose cancel its
    /// connection cannot take, for a timer filled it once `ready` was signalled; then the
    /// worker stops (its thread exits). Returns the request's error.
    private func requestWithItsCancelLostThenExit(to remote: RemotePort, fillAfter ready: DispatchSemaphore?) throws -> PortError? {
        let requester = try WorkerThread(name: "requester")
        let outcome = SharedValue<PortError?>(nil)
        try requester.performAndWait {
            let filler = LoopTimer(after: .milliseconds(1)) { _ in
                if let ready { waitOrFail(ready, "the server reading the request") }
                while (try? remote.send(LoopMessage(id: 2), timeout: .zero)) != nil {}
            }
            ThreadRunLoop.current.add(filler, to: PendingReplies.mode)
            do {
                _ = try remote.sendRequest(LoopMessage(id: 1), receiveTimeout: .milliseconds(300))
            } catch {
                outcome.withLock { $0 = error as? PortError }
            }
        }
        requester.stop() // returns once its thread has exited
        return outcome.withLock { $0 }
    }

    func testARequesterThreadThatExitsWhileTheServerHoldsItsRightCancelsTheRight() throws {
        let (thread, port, gate, entered, kept, cancellations) = server(holdInHandler: true)
        let remote = port.remote
        let cancelsNotSent = PortConnection.cancelsNotSent.load(ordering: .relaxed)

        let error = try requestWithItsCancelLostThenExit(to: remote, fillAfter: entered)
        XCTAssertEqual(error, .receiveTimedOut(remote.address))
        XCTAssertEqual(PortConnection.cancelsNotSent.load(ordering: .relaxed), cancelsNotSent + 1,
                       "the requester's cancel could not be queued: only its thread's exit can tell the server")
        gate.signal() // the server reads on

        let box = try XCTUnwrap(kept.withLock { $0.first?.box })
        // The right reports cancelled before its handlers run (on the server's thread): wait for those.
        XCTAssertTrue(waitUntil { cancellations.withLock { $0 } > 0 }, "the requester's thread exit cancels the right it left behind")
        XCTAssertTrue(box.isCancelled)
        XCTAssertEqual(cancellations.withLock { $0 }, 1, "its cancellation handler ran once")
        XCTAssertEqual(port.statistics.requestsCancelled, 1)
        XCTAssertEqual(try thread.loop.performAndWait { port.outstandingRequests.count }, 0, "no stale entry")
        box.reply(LoopMessage(id: 0, text: "for nobody"))
        XCTAssertTrue(waitUntil { (thread.loop.counters.messagesDropped[.replyCancelled] ?? 0) == 1 },
                      "its answer is dropped as cancelled")
        XCTAssertTrue(waitUntil { port.statistics.rightsOutstanding == 0 })
        kept.withLock { $0.removeAll() }
        thread.stop()
    }

    func testARequestStillQueuedWhenItsRequesterThreadExitsReachesTheHandlerCancelled() throws {
        let (thread, port, gate, entered, kept, cancellations) = server(holdInHandler: false)
        let remote = port.remote
        // The server's thread reads nothing until the requester's thread is gone.
        let held = DispatchSemaphore(value: 0)
        thread.loop.perform {
            held.signal()
            gate.wait()
        }
        waitOrFail(held, "the server's thread held")

        let error = try requestWithItsCancelLostThenExit(to: remote, fillAfter: nil)
        XCTAssertEqual(error, .receiveTimedOut(remote.address))
        XCTAssertEqual(kept.withLock { $0.count }, 0, "not read yet")
        gate.signal()

        waitOrFail(entered, "the request delivered")
        let (box, cancelledOnArrival) = try XCTUnwrap(kept.withLock { $0.first })
        XCTAssertTrue(cancelledOnArrival, "a request of a requester gone comes with its right cancelled")
        XCTAssertTrue(box.isCancelled)
        XCTAssertEqual(cancellations.withLock { $0 }, 1, "a handler added to a cancelled right runs at once")
        XCTAssertEqual(port.statistics.requestsCancelled, 1)
        XCTAssertEqual(try thread.loop.performAndWait { port.outstandingRequests.count }, 0, "no stale entry")
        // Once the port has read what was queued, it keeps nothing of the requester.
        XCTAssertTrue(waitUntil { (try? thread.loop.performAndWait { port.goneInProcessRequesters.isEmpty }) ?? false })
        box.drop() // cancelled: nothing is sent for it
        kept.withLock { $0.removeAll() }
        XCTAssertTrue(waitUntil { port.statistics.rightsOutstanding == 0 })
        thread.stop()
    }

    func testARequesterThreadThatExitsAfterItsRepliesCameCancelsNothingAndLeavesNothing() throws {
        let (thread, port, _, entered, kept, cancellations) = server(holdInHandler: false)
        let remote = port.remote
        let requester = try WorkerThread(name: "requester")
        // Its request answered from another thread while it waits.
        DispatchQueue.global().async {
            waitOrFail(entered, "the request delivered")
            kept.withLock { $0.removeFirst() }.box.reply(LoopMessage(id: 0, text: "done"))
        }
        let reply = try requester.performAndWait { try remote.sendRequest(LoopMessage(id: 1), receiveTimeout: .seconds(20)) }
        XCTAssertEqual(reply.text, "done")
        // What its exit hands the port, seen as soon as the port has done it, before any pass of
        // the server's loop could tidy up after it.
        let (gone, outstanding) = try onThread(of: thread.loop, rightAfter: { requester.stop() }) {
            (port.goneInProcessRequesters.count, port.outstandingRequests.count)
        }
        XCTAssertEqual(gone, 0, "with nothing queued, a requester gone leaves no trace")
        XCTAssertEqual(outstanding, 0)
        XCTAssertEqual(port.statistics.requestsCancelled, 0, "its exit cancels nothing")
        XCTAssertEqual(cancellations.withLock { $0 }, 0, "no cancellation handler runs")
        XCTAssertEqual(port.statistics.rightsOutstanding, 0)
        thread.stop()
    }

    /// Runs `happening` while `loop`'s thread is held, then `body` on that thread right after
    /// the actions queued for it meanwhile, with no pass of the loop between them, and returns
    /// what `body` returns. A requester thread's exit hands its port what it causes
    /// (`LocalPort.inProcessRequesterGone`) as such an action, queued on the thread's way out,
    /// so before `WorkerThread.stop()` returns: `body` sees the port just after the port did
    /// it, and before a read of its socket could clear what it left (`hasPendingMessage`).
    /// (A `performAndWait` is not after it: a pass may run a perform request queued after an
    /// action that came once that pass had run its actions.)
    private func onThread<T: Sendable>(of loop: ThreadRunLoop, rightAfter happening: () -> Void,
                                       _ body: @escaping @Sendable () -> T) throws -> T {
        let held = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let result = SharedValue<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        let holding = loop.runOnOwnerThread { _ in
            held.signal()
            gate.wait()
        }
        XCTAssertTrue(holding, "the server's loop runs")
        if holding { waitOrFail(held, "the server's thread held") }
        happening()
        // Queued after what `happening` queued: the loop, let go, takes them all in one batch.
        let queued = loop.runOnOwnerThread { _ in
            result.withLock { $0 = body() }
            done.signal()
        }
        gate.signal()
        if queued { waitOrFail(done, "the server's loop running what was queued") }
        return try XCTUnwrap(result.withLock { $0 })
    }
}
