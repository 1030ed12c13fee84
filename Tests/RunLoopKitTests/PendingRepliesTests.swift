@testable import RunLoopKit
import XCTest

/// The bookkeeping of `sendRequest`'s waiting list: which replies are waited for, and
/// which are refused (and so dropped as late by the connection they came back on).
final class PendingRepliesTests: XCTestCase {
    /// Two connections, as the list tells them apart (by identity, never dereferenced).
    private let one = ObjectIdentifier(PendingRepliesTests.self), other = ObjectIdentifier(PendingRepliesTests.Marker.self)
    private final class Marker {}

    func testAReplyIsTakenOnceForItsRequest() throws {
        let replies = PendingReplies()
        replies.begin(1, connection: one)
        XCTAssertNil(try replies.take(1))
        XCTAssertTrue(replies.received(LoopMessage(id: 1, text: "answer"), for: 1))
        XCTAssertEqual((try replies.take(1))?.text, "answer")
        XCTAssertNil(try replies.take(1))
    }

    func testASecondReplyToTheSameRequestIsRefusedAndTheFirstIsKept() throws {
        let replies = PendingReplies()
        replies.begin(7, connection: one)
        XCTAssertTrue(replies.received(LoopMessage(id: 1, text: "first"), for: 7))
        XCTAssertFalse(replies.received(LoopMessage(id: 1, text: "second"), for: 7))
        XCTAssertEqual((try replies.take(7))?.text, "first")
    }

    func testAReplyToAnAbandonedOrUnknownRequestIsRefused() throws {
        let replies = PendingReplies()
        replies.begin(3, connection: one)
        replies.abandon(3)
        XCTAssertFalse(replies.received(LoopMessage(id: 1), for: 3))
        XCTAssertFalse(replies.received(LoopMessage(id: 1), for: 103))
        XCTAssertNil(try replies.take(3))
    }

    func testNestedRequestsEachGetTheirOwnReplyInAnyOrder() throws {
        let replies = PendingReplies()
        replies.begin(1, connection: one)
        replies.begin(2, connection: one)
        XCTAssertTrue(replies.received(LoopMessage(id: 1, text: "outer"), for: 1))
        XCTAssertTrue(replies.received(LoopMessage(id: 2, text: "inner"), for: 2))
        XCTAssertEqual((try replies.take(2))?.text, "inner")
        XCTAssertEqual((try replies.take(1))?.text, "outer")
    }

    func testAFailureInPlaceOfAReplyIsTakenOnceAsThatFailure() throws {
        let replies = PendingReplies()
        replies.begin(5, connection: one)
        let failure = PortError.remoteHandlerFailed(PortAddress(unchecked: "inproc://x"), reason: "no such job")
        XCTAssertTrue(replies.failed(failure, for: 5))
        XCTAssertFalse(replies.received(LoopMessage(id: 1), for: 5), "the failure settled the request")
        XCTAssertThrowsError(try replies.take(5)) { XCTAssertEqual($0 as? PortError, failure) }
        XCTAssertNil(try replies.take(5))
    }

    func testALostConnectionFailsAtOnceEveryRequestWaitedForOnItAndNoOther() throws {
        let replies = PendingReplies()
        replies.begin(1, connection: one)
        replies.begin(2, connection: other)
        replies.begin(3, connection: one)
        XCTAssertTrue(replies.received(LoopMessage(id: 1, text: "came first"), for: 3))
        let gone = PortError.remoteInvalid(PortAddress(unchecked: "ipc:///tmp/gone.sock"))
        XCTAssertEqual(replies.connectionLost(one, gone), 1, "only request 1: 3's reply came, 2 went out on another connection")
        XCTAssertThrowsError(try replies.take(1)) { XCTAssertEqual($0 as? PortError, gone) }
        XCTAssertNil(try replies.take(2))
        XCTAssertEqual((try replies.take(3))?.text, "came first")
        XCTAssertFalse(replies.received(LoopMessage(id: 1), for: 1), "a reply after the loss is late")
    }
}
