@testable import RunLoopKit
import XCTest

/// An async request's task, as pure transitions over a stand-in continuation: resumed
/// exactly once, by the first of the reply and the cancellation, and a cancellation that
/// comes before the task waits is kept for when it does.
final class RequestExchangeStateTests: XCTestCase {
    private typealias S = RequestExchange.State<String>

    func testAnInstalledTaskWaitsAndTheReplyResumesItOnce() {
        var state = S.starting
        XCTAssertFalse(state.isFinished)
        XCTAssertTrue(state.install("task"))
        XCTAssertEqual(state, .waiting("task"))
        XCTAssertFalse(state.isFinished, "waiting: the request is still to be sent or answered")
        XCTAssertEqual(state.finish(), "task")
        XCTAssertEqual(state, .finished)
        XCTAssertTrue(state.isFinished)
        XCTAssertNil(state.finish(), "a second reply resumes nothing")
        XCTAssertNil(state.cancel(), "nor does a cancellation after the reply")
        XCTAssertEqual(state, .finished)
    }

    func testACancellationWhileWaitingResumesTheTaskOnceAndTheReplyThenNothing() {
        var state = S.starting
        _ = state.install("task")
        XCTAssertEqual(state.cancel(), "task")
        XCTAssertTrue(state.isFinished)
        XCTAssertNil(state.cancel())
        XCTAssertNil(state.finish(), "the late reply is dropped")
    }

    func testACancellationBeforeTheTaskWaitsIsKeptAndRefusesTheInstall() {
        var state = S.starting
        XCTAssertNil(state.cancel(), "nothing to resume yet")
        XCTAssertEqual(state, .cancelledBeforeWaiting)
        XCTAssertTrue(state.isFinished, "the requester never sends it")
        XCTAssertNil(state.cancel())
        XCTAssertNil(state.finish())
        XCTAssertFalse(state.install("task"), "the task resumes with CancellationError at once")
        XCTAssertEqual(state, .finished)
        XCTAssertNil(state.finish())
    }

    func testNothingResumesATaskThatHasNotWaitedYet() {
        var state = S.starting
        XCTAssertNil(state.finish())
        XCTAssertEqual(state, .starting, "a reply cannot come before the request was sent")
    }
}
