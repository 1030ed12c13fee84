import Dispatch
import Glibc
@testable import RunLoopCore
@testable import RunLoopKit
import RunLoopSystem
import RunLoopTestSupport
import RunLoopWire
import RunLoopZMQ
import XCTest

/// A request's reply right (`PortHandler.deferring`, `ReplyRight`): answered later, from any
/// thread, exactly once; a dropped right answers with a no reply at once; a requester's
/// cancel reaches the right, and only that requester's.
final class ReplyRightTests: XCTestCase {
    /// A thread serving a port whose handler is `handler`; the port itself, for its statistics.
    private func server(_ handler: @escaping @Sendable (LoopMessage, consuming ReplyRight?) throws -> Void)
        -> (LoopThread, LocalPort) {
        let served = SharedValue<LocalPort?>(nil)
        let thread = LoopThread { loop in
            let port = try! LocalPort(handling: .deferring { message, right in try handler(message, right) })
            loop.add(port, to: .default)
            served.withLock { $0 = port }
        }
        return (thread, served.withLock { $0! })
    }

    /// A server whose handler keeps every request's right, in arrival order.
    private func keepingServer() -> (LoopThread, LocalPort, SharedValue<[ReplyRightBox]>) {
        let kept = SharedValue<[ReplyRightBox]>([])
        let (thread, port) = server { _, right in
            guard let right else { return }
            let box = ReplyRightBox(right)
            kept.withLock { $0.append(box) }
        }
        return (thread, port, kept)
    }

    /// A raw DEALER connected to `port` over inproc: a requester that speaks the wire format itself.
    private func rawRequester(to port: LocalPort) throws -> ZMQSocket {
        let dealer = try ZMQSocket(type: .dealer)
        try dealer.connect(port.remote.address.rawValue)
        return dealer
    }

    /// The next message `dealer` receives, decoded; nil if none comes within `limit`.
    private func receive(on dealer: ZMQSocket, within limit: Duration = .seconds(10)) throws -> WireMessage? {
        guard try dealer.poll(for: .pollIn, timeout: limit).contains(.pollIn),
              let frames = try dealer.receive(dontWait: true) else { return nil }
        return try WireCodec.decode(frames)
    }

    func testAReplyFromAWorkerThreadReachesTheRequesterWithTheRequestsID() throws {
        let worker = try WorkerThread(name: "replier")
        let (thread, port) = server { message, right in
            guard let right else { return }
            _ = try? worker.perform(moving: right) { right in
                right.reply(LoopMessage(id: 99, text: (message.text ?? "").uppercased()))
            }
        }
        let reply = try port.remote.sendRequest(LoopMessage(id: 7, text: "ping"), receiveTimeout: .seconds(10))
        XCTAssertEqual(reply.text, "PING")
        XCTAssertEqual(reply.id, 7, "a reply carries its request's id whatever the right's holder put in it")
        XCTAssertTrue(waitUntil { port.statistics.rightsOutstanding == 0 })
        worker.stop()
        thread.stop()
    }

    func testARightDroppedUnusedAnswersTheRequesterWithANoReplyNotATimeout() throws {
        let (thread, port) = server { _, right in _ = consume right }
        XCTAssertThrowsError(try port.remote.sendRequest(LoopMessage(id: 1), receiveTimeout: .seconds(60))) { error in
            XCTAssertEqual(error as? PortError, .noReply(port.remote.address))
        }
        XCTAssertEqual(port.statistics.rightsOutstanding, 0)
        thread.stop()
    }

    func testARightKeptAndDroppedLaterOnAnotherThreadAnswersWithANoReply() throws {
        let (thread, port, kept) = keepingServer()
        let result = SharedValue<Result<LoopMessage, PortError>?>(nil)
        let remote = port.remote
        DispatchQueue.global().async {
            let outcome = Result { () throws(PortError) in
                try remote.sendRequest(LoopMessage(id: 3), receiveTimeout: .seconds(60))
            }
            result.withLock { $0 = outcome }
        }
        XCTAssertTrue(waitUntil { kept.withLock { $0.count } == 1 })
        XCTAssertEqual(port.statistics.rightsOutstanding, 1, "the right is held: counted as outstanding")
        let box = kept.withLock { $0.removeFirst() }
        box.drop() // on this thread, not the port's
        XCTAssertTrue(waitUntil { result.withLock { $0 != nil } })
        guard case .failure(let error)? = result.withLock({ $0 }) else { return XCTFail("the request was answered") }
        XCTAssertEqual(error, .noReply(port.remote.address))
        XCTAssertTrue(waitUntil { port.statistics.rightsOutstanding == 0 })
        thread.stop()
    }

    func testAHandlerThatThrowsBeforeUsingItsRightIsAnsweredWithItsFailure() throws {
        struct Refused: Error {}
        let (thread, port) = server { _, right in
            _ = right // held to the end of the handler, unused
            throw Refused()
        }
        XCTAssertThrowsError(try port.remote.sendRequest(LoopMessage(id: 4), receiveTimeout: .seconds(60))) { error in
            guard case .remoteHandlerFailed(_, let reason)? = error as? PortError else { return XCTFail("\(error)") }
            XCTAssertEqual(reason, "Refused()")
        }
        XCTAssertEqual(port.statistics.handlerErrors, 1)
        thread.stop()
    }

    func testAReplyInsideTheHandlerIsSentAtOnce() throws {
        let (thread, port) = server { message, right in right?.reply(LoopMessage(id: 0, text: "now")) }
        XCTAssertEqual(try port.remote.sendRequest(LoopMessage(id: 5)).text, "now")
        XCTAssertEqual(port.statistics.rightsOutstanding, 0)
        thread.stop()
    }

    func testARightFailedFromAnotherThreadGivesTheRequesterTheReason() throws {
        struct Unavailable: Error, CustomStringConvertible { var description: String { "unavailable" } }
        let (thread, port) = server { _, right in
            guard let right else { return }
            DispatchQueue.global().async { [moved = MovedValue(right)] in moved.take()?.fail(Unavailable()) }
        }
        XCTAssertThrowsError(try port.remote.sendRequest(LoopMessage(id: 6), receiveTimeout: .seconds(60))) { error in
            XCTAssertEqual(error as? PortError, .remoteHandlerFailed(port.remote.address, reason: "unavailable"))
        }
        thread.stop()
    }

    func testARightThatOutlivesItsPortDropsItsAnswerAndCountsIt() throws {
        let (thread, port, kept) = keepingServer()
        let dealer = try rawRequester(to: port)
        XCTAssertTrue(try dealer.send(LoopMessage(id: 8), as: .request, correlationID: 1, dontWait: false))
        XCTAssertTrue(waitUntil { kept.withLock { $0.count } == 1 })
        port.invalidate() // closed on the owner thread, in its next pass
        let box = kept.withLock { $0.removeFirst() }
        XCTAssertTrue(waitUntil { box.isCancelled }, "the port's close cancels its outstanding requests")
        let droppedBefore = port.statistics.messagesDropped
        box.reply(LoopMessage(id: 0, text: "too late"))
        XCTAssertTrue(waitUntil { port.statistics.messagesDropped == droppedBefore + 1 }, "the answer is counted, not sent")
        XCTAssertTrue(waitUntil { port.statistics.rightsOutstanding == 0 })
        thread.stop()
    }

    func testARequestWhoseRightIsHeldWhenItsPortIsInvalidatedGetsANoReplyAtOnce() throws {
        let (thread, port, kept) = keepingServer()
        let remote = port.remote
        let result = SharedValue<Result<LoopMessage, PortError>?>(nil)
        DispatchQueue.global().async {
            let outcome = Result { () throws(PortError) in try remote.sendRequest(LoopMessage(id: 13), receiveTimeout: .seconds(60)) }
            result.withLock { $0 = outcome }
        }
        XCTAssertTrue(waitUntil { kept.withLock { $0.count } == 1 })
        port.invalidate()
        XCTAssertTrue(waitUntil { result.withLock { $0 != nil } })
        guard case .failure(let error)? = result.withLock({ $0 }) else { return XCTFail("answered") }
        XCTAssertEqual(error, .noReply(remote.address), "a dead port's held rights notify their requesters")
        kept.withLock { $0.removeAll() }
        thread.stop()
    }

    func testARightThatOutlivesItsOwnerThreadFailsCleanly() throws {
        let (thread, port, kept) = keepingServer()
        let dealer = try rawRequester(to: port)
        XCTAssertTrue(try dealer.send(LoopMessage(id: 9), as: .request, correlationID: 1, dontWait: false))
        XCTAssertTrue(waitUntil { kept.withLock { $0.count } == 1 })
        thread.stop() // the owner thread exits: its loop is torn down, the port closed
        let box = kept.withLock { $0.removeFirst() }
        XCTAssertTrue(box.isCancelled, "the port's close cancels its outstanding requests")
        let droppedBefore = port.statistics.messagesDropped
        box.reply(LoopMessage(id: 0))
        XCTAssertEqual(port.statistics.rightsOutstanding, 0)
        XCTAssertEqual(port.statistics.messagesDropped, droppedBefore + 1, "the answer is counted, not sent")
    }

    func testARightDroppedAsItsOwnerThreadExitsIsAnsweredOrCountedNeverATrap() throws {
        // The drop's answer is handed to the owner loop as a control action, which its
        // thread's exit may be the one to run (the loop torn down by then).
        for round in 0..<50 {
            let (thread, port, kept) = keepingServer()
            let dealer = try rawRequester(to: port)
            XCTAssertTrue(try dealer.send(LoopMessage(id: 1), as: .request, correlationID: 1, dontWait: false))
            XCTAssertTrue(waitUntil { kept.withLock { $0.count } == 1 }, "round \(round)")
            kept.withLock { $0.removeAll() } // dropped here: a no reply handed to the owner loop
            thread.stop()
            XCTAssertEqual(port.statistics.rightsOutstanding, 0, "round \(round)")
        }
    }

    func testACancelFromTheRequestersConnectionReachesTheRightAndItsReplyIsDropped() throws {
        let kept = SharedValue<[ReplyRightBox]>([])
        let cancellations = SharedValue(0)
        let (thread, port) = server { message, right in
            guard let right else { return }
            right.onCancel { cancellations.withLock { $0 += 1 } }
            if message.id == 20 { return right.reply(LoopMessage(id: 0, text: "round trip")) }
            let box = ReplyRightBox(right)
            kept.withLock { $0.append(box) }
        }
        let dealer = try rawRequester(to: port)
        XCTAssertTrue(try dealer.send(LoopMessage(id: 10), as: .request, correlationID: 1, dontWait: false))
        XCTAssertTrue(try dealer.send(LoopMessage(id: 10), as: .cancel, correlationID: 1, dontWait: false))
        // One round trip on the same connection: the cancel was handled before its reply.
        XCTAssertTrue(try dealer.send(LoopMessage(id: 20), as: .request, correlationID: 2, dontWait: false))
        XCTAssertEqual(try receive(on: dealer)?.correlationID, 2)
        let box = kept.withLock { $0.removeFirst() }
        XCTAssertTrue(box.isCancelled)
        XCTAssertEqual(cancellations.withLock { $0 }, 1, "the cancellation handler ran once")
        XCTAssertEqual(port.statistics.requestsCancelled, 1)
        box.reply(LoopMessage(id: 0, text: "for nobody"))
        // A later request's reply is the next thing the requester receives: never the cancelled one's.
        XCTAssertTrue(try dealer.send(LoopMessage(id: 20), as: .request, correlationID: 3, dontWait: false))
        XCTAssertEqual(try receive(on: dealer)?.correlationID, 3)
        XCTAssertTrue(waitUntil {
            (thread.loop.counters.messagesDropped[.replyCancelled] ?? 0) == 1
        })
        thread.stop()
    }

    func testACancelFromAnotherConnectionCancelsNothing() throws {
        let kept = SharedValue<[ReplyRightBox]>([])
        let (thread, port) = server { message, right in
            guard let right else { return }
            if message.id == 20 { return right.reply(LoopMessage(id: 0)) }
            let box = ReplyRightBox(right)
            kept.withLock { $0.append(box) }
        }
        let owner = try rawRequester(to: port)
        let forger = try rawRequester(to: port)
        XCTAssertTrue(try owner.send(LoopMessage(id: 11), as: .request, correlationID: 7, dontWait: false))
        XCTAssertTrue(waitUntil { kept.withLock { $0.count } == 1 })
        // The forger names the owner's correlation id: the port looks under the forger's connection only.
        XCTAssertTrue(try forger.send(LoopMessage(id: 11), as: .cancel, correlationID: 7, dontWait: false))
        XCTAssertTrue(try forger.send(LoopMessage(id: 20), as: .request, correlationID: 1, dontWait: false))
        XCTAssertEqual(try receive(on: forger)?.correlationID, 1)
        let box = kept.withLock { $0.removeFirst() }
        XCTAssertFalse(box.isCancelled)
        XCTAssertEqual(thread.loop.counters.messagesDropped[.lateCancel], 1)
        box.reply(LoopMessage(id: 0, text: "yours"))
        let reply = try XCTUnwrap(receive(on: owner))
        XCTAssertEqual(reply.correlationID, 7)
        XCTAssertEqual(reply.kind, .reply)
        thread.stop()
    }

    func testAThousandRequestsCancelledAtOnceAllReportCancelledWithinOneRoundTrip() throws {
        let kept = SharedValue<[ReplyRightBox]>([])
        let (thread, port) = server { message, right in
            guard let right else { return }
            if message.id == 20 { return right.reply(LoopMessage(id: 0)) }
            let box = ReplyRightBox(right)
            kept.withLock { $0.append(box) }
        }
        let dealer = try rawRequester(to: port)
        for id in 1...1000 {
            XCTAssertTrue(try dealer.send(LoopMessage(id: 12), as: .request, correlationID: UInt64(id), dontWait: false))
        }
        for id in 1...1000 {
            XCTAssertTrue(try dealer.send(LoopMessage(id: 12), as: .cancel, correlationID: UInt64(id), dontWait: false))
        }
        XCTAssertTrue(try dealer.send(LoopMessage(id: 20), as: .request, correlationID: 5000, dontWait: false))
        XCTAssertEqual(try receive(on: dealer)?.correlationID, 5000)
        XCTAssertEqual(kept.withLock { $0.count }, 1000)
        XCTAssertEqual(kept.withLock { $0.filter(\.isCancelled).count }, 1000, "a handler checking its right would have stopped")
        XCTAssertEqual(port.statistics.requestsCancelled, 1000)
        kept.withLock { $0.removeAll() } // dropped: cancelled, so nothing is sent for them
        XCTAssertTrue(waitUntil { port.statistics.rightsOutstanding == 0 })
        XCTAssertNil(try receive(on: dealer, within: .milliseconds(200)), "nothing is sent for a cancelled request")
        thread.stop()
    }

    func testASnapshotShowsThePortsOutstandingRightsAndCancelledRequests() throws {
        let (thread, port, kept) = keepingServer()
        let dealer = try rawRequester(to: port)
        for id in 1...3 { XCTAssertTrue(try dealer.send(LoopMessage(id: 1), as: .request, correlationID: UInt64(id), dontWait: false)) }
        XCTAssertTrue(try dealer.send(LoopMessage(id: 1), as: .cancel, correlationID: 1, dontWait: false))
        XCTAssertTrue(waitUntil { port.statistics.requestsCancelled == 1 })
        let snapshot = try thread.loop.performAndWait { thread.loop.snapshot() }
        let info = try XCTUnwrap(snapshot.modes.flatMap(\.ports).first { $0.id == ObjectIdentifier(port) })
        XCTAssertEqual(info.rightsOutstanding, 3)
        XCTAssertEqual(info.requestsCancelled, 1)
        XCTAssertTrue("\(snapshot)".contains("rights outstanding 3, requests cancelled 1"), "\(snapshot)")
        kept.withLock { $0.removeAll() }
        XCTAssertTrue(waitUntil { port.statistics.rightsOutstanding == 0 })
        thread.stop()
    }

    func testAPortWithoutAHandlerForRequestsAnswersThemWithANoReply() throws {
        let kept = SharedValue<LocalPort?>(nil)
        let thread = LoopThread { loop in
            let port = try! LocalPort(handling: nil)
            loop.add(port, to: .default)
            kept.withLock { $0 = port }
        }
        let remote = kept.withLock { $0!.remote }
        XCTAssertThrowsError(try remote.sendRequest(LoopMessage(id: 1), receiveTimeout: .seconds(60))) { error in
            XCTAssertEqual(error as? PortError, .noReply(remote.address))
        }
        thread.stop()
    }
}

/// A reply right kept in a copyable box, for tests that hold rights across threads.
final class ReplyRightBox: @unchecked Sendable {
    private let moved: MovedValue<ReplyRight>
    let request: OutstandingRequest

    init(_ right: consuming ReplyRight) {
        request = right.request
        moved = MovedValue(right)
    }

    var isCancelled: Bool { request.isCancelled }

    func reply(_ message: LoopMessage) { moved.take()?.reply(message) }

    func drop() { _ = moved.take() }
}
