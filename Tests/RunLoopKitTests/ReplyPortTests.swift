@testable import RunLoopKit
import XCTest

/// The bookkeeping of a thread's private reply port: which replies are waited for, and
/// which are dropped as late. Replies are handed to it as its port's delivery would.
final class ReplyPortTests: XCTestCase {
    private func deliver(_ reply: LoopMessage, for id: UInt64, to replies: ReplyPort) {
        replies.port.replyHandler?(id, reply)
    }

    func testAReplyIsTakenOnceForItsRequest() throws {
        let replies = try ReplyPort()
        defer { replies.port.invalidate() }
        let id = replies.begin()
        XCTAssertNil(replies.take(id))
        deliver(LoopMessage(id: 1, text: "answer"), for: id, to: replies)
        XCTAssertEqual(replies.take(id)?.text, "answer")
        XCTAssertNil(replies.take(id))
        XCTAssertEqual(replies.port.statistics.messagesDropped, 0)
    }

    func testASecondReplyToTheSameRequestIsDroppedAndTheFirstIsKept() throws {
        let replies = try ReplyPort()
        defer { replies.port.invalidate() }
        let id = replies.begin()
        deliver(LoopMessage(id: 1, text: "first"), for: id, to: replies)
        deliver(LoopMessage(id: 1, text: "second"), for: id, to: replies)
        XCTAssertEqual(replies.port.statistics.messagesDropped, 1)
        XCTAssertEqual(replies.take(id)?.text, "first")
    }

    func testAReplyToAnAbandonedOrUnknownRequestIsDropped() throws {
        let replies = try ReplyPort()
        defer { replies.port.invalidate() }
        let id = replies.begin()
        replies.abandon(id)
        deliver(LoopMessage(id: 1), for: id, to: replies)
        deliver(LoopMessage(id: 1), for: id + 100, to: replies)
        XCTAssertEqual(replies.port.statistics.messagesDropped, 2)
        XCTAssertNil(replies.take(id))
    }

    func testNestedRequestsEachGetTheirOwnReplyInAnyOrder() throws {
        let replies = try ReplyPort()
        defer { replies.port.invalidate() }
        let outer = replies.begin()
        let inner = replies.begin()
        XCTAssertNotEqual(outer, inner)
        deliver(LoopMessage(id: 1, text: "outer"), for: outer, to: replies)
        deliver(LoopMessage(id: 2, text: "inner"), for: inner, to: replies)
        XCTAssertEqual(replies.take(inner)?.text, "inner")
        XCTAssertEqual(replies.take(outer)?.text, "outer")
        XCTAssertEqual(replies.port.statistics.messagesDropped, 0)
    }

    func testATCPTargetOfAnotherProcessGetsATCPReplyAddressBoundOnTheLocalEndOfTheRoute() throws {
        let replies = try ReplyPort()
        defer { replies.port.invalidate() }
        // Nothing of this process listens there, so the reply cannot take a shortcut.
        let target = RemotePort(try PortAddress(validating: "tcp://127.0.0.1:9"))
        let address = try replies.replyPort(for: target).address.rawValue
        XCTAssertTrue(address.hasPrefix("tcp://127.0.0.1:"), address)
        XCTAssertNotEqual(address, "tcp://127.0.0.1:9")
        XCTAssertEqual(try replies.replyPort(for: target).address.rawValue, address, "bound once per target")
        let sameHost = RemotePort(try PortAddress(validating: "tcp://127.0.0.1:7"))
        XCTAssertEqual(try replies.replyPort(for: sameHost).address.rawValue, address, "and once per local address")
        XCTAssertNil(replies.port.name, "a tcp reply address needs no registered name")
    }

    func testAnIPCTargetGetsTheRegisteredIPCAddressEvenOnceATCPOneIsBound() throws {
        let replies = try ReplyPort()
        defer { replies.port.invalidate() }
        _ = try replies.replyPort(for: RemotePort(try PortAddress(validating: "tcp://127.0.0.1:9")))
        let ipc = try replies.replyPort(for: RemotePort(try PortAddress(validating: "ipc:///tmp/runloopkit-nobody.sock")))
        XCTAssertTrue(ipc.address.rawValue.hasPrefix("ipc://"), ipc.address.rawValue)
        XCTAssertNotNil(replies.port.name)
    }

    func testARequestToACurvePortOverTCPIsRefusedBecauseItsReplyWouldTravelUnencrypted() throws {
        let replies = try ReplyPort()
        defer { replies.port.invalidate() }
        let keys = try PortKeyPair.generate()
        let target = try RemotePort(try PortAddress(validating: "tcp://127.0.0.1:9"), curveServerKey: keys.publicKey)
        XCTAssertThrowsError(try replies.replyPort(for: target)) { error in
            guard case PortError.invalidAddress(let text) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(text.contains("unencrypted"), text)
        }
    }
}
