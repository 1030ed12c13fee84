import Dispatch
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopWire
import RunLoopZMQ
import XCTest

/// A loop's counters of messages dropped, by the reasons its ports drop them, as a loop's
/// snapshot shows them. Each test counts the difference its own runs, in a mode of its
/// own, make. (Passes, wake-ups and messages handled: `LoopCountersTests` in
/// RunLoopCoreTests.)
final class MessageDropCountersTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }
    private var counters: LoopCounters { loop.snapshot().counters }

    private func uniqueMode(_ base: String) -> LoopMode { LoopMode("\(base)-\(UInt32.random(in: 0...UInt32.max))") }

    func testMalformedMessagesAndUnknownVersionsAreCountedUnderTheirReasons() throws {
        let mode = uniqueMode("malformed")
        var delivered: [Int32] = []
        let port = try LocalPort { message in delivered.append(message.id); return nil }
        loop.add(port, to: mode)
        let raw = try ZMQSocket(type: .dealer)
        try raw.connect(port.inProcessAddress.rawValue)
        let valid = WireCodec.encode(LoopMessage(id: 42).wire(kind: .message))
        var badVersion = valid
        badVersion[0][3] = 99
        let before = counters
        for frames in [[[1, 2, 3]], badVersion, [valid[0] + [0]], valid] { XCTAssertTrue(try raw.send(frames, dontWait: false)) }
        XCTAssertTrue(runCurrentLoop(in: mode) { delivered == [42] })
        let after = counters
        XCTAssertEqual(after.messagesDropped[.malformed]! - before.messagesDropped[.malformed]!, 2)
        XCTAssertEqual(after.messagesDropped[.unsupportedVersion]! - before.messagesDropped[.unsupportedVersion]!, 1)
        XCTAssertEqual(after.messagesHandled - before.messagesHandled, 1, "dropped messages are not handled ones")
        XCTAssertEqual(port.statistics.messagesDropped, 3)
        port.invalidate()
    }

    func testAMessageForAPortWithoutHandlerIsCountedAsDroppedForNoHandler() throws {
        let mode = uniqueMode("no-handler")
        let port = try LocalPort()
        loop.add(port, to: mode)
        let before = counters
        try port.send(LoopMessage(id: 1))
        XCTAssertTrue(runCurrentLoop(in: mode) { port.statistics.messagesDropped == 1 })
        XCTAssertEqual(counters.messagesDropped[.noHandler]! - before.messagesDropped[.noHandler]!, 1)
        port.invalidate()
    }

    func testAReplyToARequesterThatIsGoneIsDroppedAtOnceAndCountedAsRequesterGone() throws {
        let mode = uniqueMode("requester-gone")
        var requests = 0
        let port = try LocalPort { _ in requests += 1; return LoopMessage(id: 0, text: "too late") }
        loop.add(port, to: mode)
        // A requester that dies mid-request: its request is queued, then it is gone.
        let routingID = Array("doomed".utf8)
        var doomed: ZMQSocket? = try ZMQSocket(type: .dealer)
        try doomed?.setOption(.routingID, routingID)
        try doomed?.connect(port.inProcessAddress.rawValue)
        XCTAssertEqual(try doomed?.send(WireCodec.encode(LoopMessage(id: 9).wire(kind: .request, correlationID: 1)), dontWait: false), true)
        doomed = nil
        XCTAssertTrue(try waitUntilUnroutable(routingID, from: port.socket), "libzmq saw the requester go")
        let before = counters
        XCTAssertTrue(runCurrentLoop(in: mode) { requests == 1 })
        XCTAssertEqual(counters.messagesDropped[.requesterGone]! - before.messagesDropped[.requesterGone]!, 1)
        XCTAssertEqual(port.statistics.repliesFailed, 1)
        port.invalidate()
    }

    func testAReplyToARequesterThatDoesNotReadItsRepliesIsCountedAsReplyNotSentAndNeverWaitedFor() throws {
        let mode = uniqueMode("not-reading")
        var requests = 0
        let port = try LocalPort { _ in requests += 1; return LoopMessage(id: 0, text: "unread") }
        loop.add(port, to: mode)
        // More requests than the connection's reply queue holds (the port's send
        // high-water mark plus the requester's receive one, for inproc), never read.
        let count = 2_500
        let address = port.inProcessAddress.rawValue
        let requester = LockedValue<ZMQSocket?>(nil)
        let sender = TestThread {
            let dealer = try! ZMQSocket(type: .dealer)
            try! dealer.setOption(.sendHighWaterMark, 0)
            try! dealer.connect(address)
            for id in 0..<count {
                _ = try! dealer.send(WireCodec.encode(LoopMessage(id: Int32(id)).wire(kind: .request, correlationID: UInt64(id + 1))),
                                     dontWait: false)
            }
            requester.withLock { $0 = dealer }
        }
        let before = counters
        XCTAssertTrue(runCurrentLoop(in: mode) { requests == count })
        sender.join()
        let notSent = counters.messagesDropped[.replyNotSent]! - before.messagesDropped[.replyNotSent]!
        XCTAssertGreaterThan(notSent, 0, "the queue filled up")
        XCTAssertEqual(port.statistics.repliesFailed, notSent)
        // Every reply the port did not count as not sent is waiting for the requester.
        let dealer = try XCTUnwrap(requester.withLock { $0 })
        var queued = 0
        while try dealer.receive(dontWait: true) != nil { queued += 1 }
        XCTAssertEqual(queued + notSent, count)
        port.invalidate()
    }

    func testAReplyArrivingAfterItsRequestTimedOutIsCountedAsLate() throws {
        // The server is a port on this very thread, in a mode the request's wait does not
        // run: it answers only once the request has given up.
        let mode = uniqueMode("late")
        var answered = 0
        let server = try LocalPort { request in answered += 1; return LoopMessage(id: request.id) }
        loop.add(server, to: mode)
        let before = counters
        XCTAssertThrowsError(try server.remote.sendRequest(LoopMessage(id: 3), receiveTimeout: .milliseconds(50))) {
            guard case .receiveTimedOut = $0 as? PortError else { return XCTFail("\($0)") }
        }
        XCTAssertTrue(runCurrentLoop(in: mode) { answered == 1 })
        // A dropped reply is no handled source, so the run would not return for it: the
        // reply mode is run in short slices until the drop shows.
        let limit = Deadline.after(.seconds(20))
        while counters.messagesDropped[.lateReply]! == before.messagesDropped[.lateReply]! && Deadline.now() < limit {
            _ = loop.run(mode: PendingReplies.mode, before: .after(.milliseconds(20)))
        }
        XCTAssertEqual(counters.messagesDropped[.lateReply]! - before.messagesDropped[.lateReply]!, 1)
        server.invalidate()
    }
}
