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
}
