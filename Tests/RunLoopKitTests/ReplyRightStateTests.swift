@testable import RunLoopKit
import XCTest

/// `ReplyRightState`'s transitions, without a port: each event in each phase, and what the
/// port is told to do.
final class ReplyRightStateTests: XCTestCase {
    // Computed: XCTest keeps its test objects until exit, and a stored message would show as a leak.
    private var reply: ReplyRightState.Answer { .reply(LoopMessage(id: 1, text: "done")) }

    func testAnAnswerInsideTheHandlerIsSentAndTheHandlersEndDoesNothingMore() {
        var state = ReplyRightState()
        XCTAssertEqual(state.after(.answered(reply)), .send(reply))
        XCTAssertEqual(state.after(.dropped), .none, "the right's deinit after its answer")
        XCTAssertEqual(state.after(.handlerReturned), .none)
        XCTAssertTrue(state.isSettled)
    }

    func testARightDroppedInsideTheHandlerIsAnsweredWithANoReplyWhenTheHandlerReturns() {
        var state = ReplyRightState()
        XCTAssertEqual(state.after(.dropped), .none)
        XCTAssertEqual(state.after(.handlerReturned), .sendNoReply)
        XCTAssertTrue(state.isSettled)
    }

    func testARightDroppedInsideAHandlerThatThrowsIsAnsweredWithTheFailure() {
        var state = ReplyRightState()
        XCTAssertEqual(state.after(.dropped), .none)
        XCTAssertEqual(state.after(.handlerThrew("boom")), .send(.failure("boom")))
    }

    func testARightKeptPastItsHandlerIsAnsweredWhenUsedOrDropped() {
        var kept = ReplyRightState()
        XCTAssertEqual(kept.after(.handlerReturned), .none)
        XCTAssertFalse(kept.isSettled)
        XCTAssertEqual(kept.after(.answered(reply)), .send(reply))
        var dropped = ReplyRightState()
        _ = dropped.after(.handlerReturned)
        XCTAssertEqual(dropped.after(.dropped), .sendNoReply)
    }

    func testAHandlerThatThrowsWhileItsRightIsElsewhereAnswersWithItsFailureAndALaterAnswerIsDropped() {
        var state = ReplyRightState()
        XCTAssertEqual(state.after(.handlerThrew("boom")), .send(.failure("boom")))
        XCTAssertEqual(state.after(.answered(reply)), .dropAnswered)
        XCTAssertEqual(state.after(.dropped), .none)
    }

    func testACancelledRequestsAnswerIsDroppedAndItsDropSendsNothing() {
        var answered = ReplyRightState()
        _ = answered.after(.handlerReturned)
        XCTAssertTrue(answered.cancel())
        XCTAssertFalse(answered.cancel(), "cancelled once")
        XCTAssertEqual(answered.after(.answered(reply)), .dropCancelled)
        var dropped = ReplyRightState()
        _ = dropped.after(.handlerReturned)
        _ = dropped.cancel()
        XCTAssertEqual(dropped.after(.dropped), .none)
        XCTAssertTrue(dropped.isSettled)
    }

    func testAnAnsweredRequestCannotBeCancelled() {
        var state = ReplyRightState()
        _ = state.after(.answered(reply))
        XCTAssertFalse(state.cancel())
        XCTAssertFalse(state.isCancelled)
    }
}
