@testable import RunLoopCore
import XCTest

/// The task of an async `performAndWait`, as pure transitions over a stand-in continuation
/// and request: resumed exactly once, its request cancelled whenever the task is cancelled
/// while it waits (at once if posted, else as it is posted), and a cancellation remembered
/// so that a request that did not run means `CancellationError`.
final class PerformAwaiterStateTests: XCTestCase {
    private typealias S = PerformAwaiter<Int>.State<String, String>

    func testAWaitingTaskKeepsItsPostedRequestAndTheWorkResumesItOnce() {
        var state = S.starting
        XCTAssertTrue(state.start("task"))
        XCTAssertNil(state.posted("request"))
        XCTAssertEqual(state, .waiting("task", request: "request"))
        XCTAssertEqual(state.resume(), "task")
        XCTAssertEqual(state, .resumed(taskCancelled: false))
        XCTAssertNil(state.resume(), "the not-run signal that follows the work resumes nothing")
        XCTAssertFalse(state.taskCancelled)
    }

    func testCancellingAWaitingTaskCancelsItsPostedRequestOnce() {
        var state = S.starting
        _ = state.start("task")
        _ = state.posted("request")
        XCTAssertEqual(state.cancel(), "request")
        XCTAssertEqual(state, .waitingCancelled("task"))
        XCTAssertNil(state.cancel(), "cancelled once")
        XCTAssertEqual(state.resume(), "task", "the request's release resumes the task")
        XCTAssertTrue(state.taskCancelled, "so its not-run means CancellationError")
    }

    func testARequestPostedAfterTheTaskWasCancelledIsCancelledAsItIsPosted() {
        var state = S.starting
        _ = state.start("task")
        XCTAssertNil(state.cancel(), "nothing posted yet")
        XCTAssertTrue(state.taskCancelled)
        XCTAssertEqual(state.posted("request"), "request")
        XCTAssertEqual(state.resume(), "task")
    }

    func testATaskCancelledBeforeItWaitsResumesAtOnceAndPostsNothing() {
        var state = S.starting
        XCTAssertNil(state.cancel())
        XCTAssertEqual(state, .cancelledBeforeWaiting)
        XCTAssertNil(state.resume())
        XCTAssertFalse(state.start("task"), "the task resumes with CancellationError")
        XCTAssertEqual(state, .resumed(taskCancelled: true))
        XCTAssertNil(state.resume())
    }

    func testWorkThatRanBeforeItsRequestWasKeptIsNotCancelledAfterwards() {
        var state = S.starting
        _ = state.start("task")
        XCTAssertEqual(state.resume(), "task", "the work ran before the post returned")
        XCTAssertNil(state.posted("request"))
        XCTAssertNil(state.cancel())
        XCTAssertTrue(state.taskCancelled, "a cancellation after the result still counts for a not-run")
    }

    func testAFailedPostResumesTheTaskWithoutARequest() {
        var state = S.starting
        _ = state.start("task")
        XCTAssertEqual(state.resume(), "task")
        XCTAssertEqual(state, .resumed(taskCancelled: false))
    }
}
