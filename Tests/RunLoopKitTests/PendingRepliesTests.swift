@testable import RunLoopKit
import XCTest

/// The bookkeeping of `sendRequest`'s waiting list: which replies are waited for, and
/// which are refused (and so dropped as late by the connection they came back on).
final class PendingRepliesTests: XCTestCase {
    func testAReplyIsTakenOnceForItsRequest() throws {
        let replies = PendingReplies()
        replies.begin(1)
        XCTAssertNil(try replies.take(1))
        XCTAssertTrue(replies.received(LoopMessage(id: 1, text: "answer"), for: 1))
        XCTAssertEqual((try replies.take(1))?.text, "answer")
        XCTAssertNil(try replies.take(1))
    }

    func testASecondReplyToTheSameRequestIsRefusedAndTheFirstIsKept() throws {
        let replies = PendingReplies()
        replies.begin(7)
        XCTAssertTrue(replies.received(LoopMessage(id: 1, text: "first"), for: 7))
        XCTAssertFalse(replies.received(LoopMessage(id: 1, text: "second"), for: 7))
        XCTAssertEqual((try replies.take(7))?.text, "first")
    }

    func testAReplyToAnAbandonedOrUnknownRequestIsRefused() throws {
        let replies = PendingReplies()
        replies.begin(3)
        replies.abandon(3)
        XCTAssertFalse(replies.received(LoopMessage(id: 1), for: 3))
        XCTAssertFalse(replies.received(LoopMessage(id: 1), for: 103))
        XCTAssertNil(try replies.take(3))
    }

    func testNestedRequestsEachGetTheirOwnReplyInAnyOrder() throws {
        let replies = PendingReplies()
        replies.begin(1)
        replies.begin(2)
        XCTAssertTrue(replies.received(LoopMessage(id: 1, text: "outer"), for: 1))
        XCTAssertTrue(replies.received(LoopMessage(id: 2, text: "inner"), for: 2))
        XCTAssertEqual((try replies.take(2))?.text, "inner")
        XCTAssertEqual((try replies.take(1))?.text, "outer")
    }

    func testAFailureInPlaceOfAReplyIsTakenOnceAsThatFailure() throws {
        let replies = PendingReplies()
        replies.begin(5)
        let failure = PortError.remoteHandlerFailed(PortAddress(unchecked: "inproc://x"), reason: "no such job")
        XCTAssertTrue(replies.failed(failure, for: 5))
        XCTAssertFalse(replies.received(LoopMessage(id: 1), for: 5), "the failure settled the request")
        XCTAssertThrowsError(try replies.take(5)) { XCTAssertEqual($0 as? PortError, failure) }
        XCTAssertNil(try replies.take(5))
    }
}
