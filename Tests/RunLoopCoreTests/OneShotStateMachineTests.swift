@testable import RunLoopCore
import XCTest

/// A task's one-shot wait, as pure transitions over a stand-in waiter and request: resumed
/// exactly once, by the first outcome; a cancellation before the task waits kept for when
/// it does; `cancel()` resuming at once (an async request), `cancelRequest()` cancelling the
/// request and leaving the outcome to it (an async perform).
final class OneShotStateMachineTests: XCTestCase {
    private typealias Machine = OneShotStateMachine<String, Int>

    private func waiting(request: Int? = nil) -> Machine {
        var machine = Machine.idle
        XCTAssertEqual(machine.wait("task"), .startWork)
        if let request { XCTAssertEqual(machine.attach(request), .none) }
        return machine
    }

    // MARK: wait

    func testAnIdleTaskThatHandsOverItsWaiterWaitsAndStartsTheWork() {
        var machine = Machine.idle
        XCTAssertFalse(machine.isFinished)
        XCTAssertEqual(machine.wait("task"), .startWork)
        XCTAssertEqual(machine, .waiting("task", request: nil))
        XCTAssertFalse(machine.isFinished, "the work is still to be done")
        XCTAssertFalse(machine.wasCancelled)
    }

    func testATaskCancelledBeforeItWaitsResumesAsItHandsOverItsWaiterAndStartsNothing() {
        var machine = Machine.idle
        XCTAssertEqual(machine.cancel(), .none, "nothing to resume yet")
        XCTAssertEqual(machine, .cancelledBeforeWaiting)
        XCTAssertTrue(machine.isFinished, "the work never starts")
        XCTAssertTrue(machine.wasCancelled)
        XCTAssertEqual(machine.cancel(), .none, "kept once")
        XCTAssertEqual(machine, .cancelledBeforeWaiting)
        XCTAssertEqual(machine.wait("task"), .resumeCancelled)
        XCTAssertEqual(machine, .finished(cancelled: true))
        XCTAssertEqual(machine.complete(), .none, "the task was resumed as it waited")
        XCTAssertEqual(machine.cancel(), .none)
        XCTAssertEqual(machine, .finished(cancelled: true))
    }

    func testARequestCancellationBeforeTheTaskWaitsIsKeptTheSameWay() {
        var machine = Machine.idle
        XCTAssertEqual(machine.cancelRequest(), .none)
        XCTAssertEqual(machine, .cancelledBeforeWaiting)
        XCTAssertEqual(machine.cancelRequest(), .none, "kept once")
        XCTAssertEqual(machine.cancel(), .none)
        XCTAssertEqual(machine.complete(), .none, "nothing was posted, so nothing completes")
        XCTAssertEqual(machine.wait("task"), .resumeCancelled, "the task resumes with CancellationError and posts nothing")
        XCTAssertEqual(machine, .finished(cancelled: true))
        XCTAssertEqual(machine.complete(), .none)
    }

    // MARK: attach

    func testAnAttachedRequestIsKeptWhileTheTaskWaits() {
        var machine = waiting()
        XCTAssertEqual(machine.attach(7), .none)
        XCTAssertEqual(machine, .waiting("task", request: 7))
        XCTAssertFalse(machine.isFinished)
    }

    func testARequestAttachedAfterACancelIsCancelledAsItIsAttached() {
        var machine = waiting()
        XCTAssertEqual(machine.cancel(), .resumeCancelled("task", request: nil), "not attached: nothing to cancel yet")
        XCTAssertTrue(machine.isFinished, "a request not sent yet is never sent")
        XCTAssertEqual(machine.attach(7), .cancelRequest, "sent meanwhile: its reply will come late")
        XCTAssertEqual(machine.complete(), .none)
    }

    func testARequestAttachedAfterARequestCancellationIsCancelledAsItIsAttached() {
        var machine = waiting()
        XCTAssertEqual(machine.cancelRequest(), .none, "nothing attached yet")
        XCTAssertEqual(machine, .waitingCancelled("task"))
        XCTAssertTrue(machine.wasCancelled)
        XCTAssertEqual(machine.attach(7), .cancelRequest)
        XCTAssertEqual(machine.complete(), .resume("task"), "the request's outcome still resumes the task")
    }

    func testARequestAttachedAfterTheWorkCompletedIsLeftAlone() {
        var machine = waiting()
        XCTAssertEqual(machine.complete(), .resume("task"), "the work ran before its post returned")
        XCTAssertEqual(machine.attach(7), .none)
        XCTAssertEqual(machine.cancelRequest(), .none, "it ran: nothing to cancel afterwards")
        XCTAssertTrue(machine.wasCancelled, "a cancellation after the result still counts for a not-run")
    }

    func testAFailedPostResumesTheTaskWithoutARequest() {
        var machine = waiting()
        XCTAssertEqual(machine.complete(), .resume("task"), "the post's error")
        XCTAssertEqual(machine, .finished(cancelled: false))
        XCTAssertFalse(machine.wasCancelled)
        XCTAssertEqual(machine.cancelRequest(), .none, "no request to cancel")
    }

    func testARequestAttachedAfterTheWorkCompletedAndTheTaskWasCancelledIsCancelledHarmlessly() {
        var machine = waiting()
        XCTAssertEqual(machine.complete(), .resume("task"))
        XCTAssertEqual(machine.cancelRequest(), .none)
        XCTAssertEqual(machine.attach(7), .cancelRequest)
    }

    // MARK: complete

    func testTheWorksOutcomeResumesTheWaitingTaskOnce() {
        var machine = waiting(request: 7)
        XCTAssertEqual(machine.complete(), .resume("task"))
        XCTAssertEqual(machine, .finished(cancelled: false))
        XCTAssertTrue(machine.isFinished)
        XCTAssertFalse(machine.wasCancelled)
    }

    func testASecondCompletionResumesNothing() {
        var machine = waiting(request: 7)
        XCTAssertEqual(machine.complete(), .resume("task"))
        XCTAssertEqual(machine.complete(), .none, "the not-run signal that follows the work, a second reply")
        XCTAssertEqual(machine, .finished(cancelled: false))
    }

    func testACompletionBeforeTheTaskWaitsResumesNothing() {
        var machine = Machine.idle
        XCTAssertEqual(machine.complete(), .none)
        XCTAssertEqual(machine, .idle, "a reply cannot come before the request went out")
    }

    func testACompletionAfterACancellationBeforeWaitingResumesNothing() {
        var machine = Machine.idle
        _ = machine.cancel()
        XCTAssertEqual(machine.complete(), .none)
        XCTAssertEqual(machine, .cancelledBeforeWaiting)
    }

    // MARK: cancel: the cancellation is the outcome

    func testACancellationResumesTheWaitingTaskAtOnceAndNamesItsRequest() {
        var machine = waiting(request: 7)
        XCTAssertEqual(machine.cancel(), .resumeCancelled("task", request: 7))
        XCTAssertEqual(machine, .finished(cancelled: true))
        XCTAssertTrue(machine.isFinished)
        XCTAssertTrue(machine.wasCancelled)
    }

    func testACompletionAfterACancellationResumesNothing() {
        var machine = waiting(request: 7)
        _ = machine.cancel()
        XCTAssertEqual(machine.complete(), .none, "the late reply, or the timeout, is dropped")
        XCTAssertEqual(machine, .finished(cancelled: true))
    }

    func testASecondCancellationResumesNothing() {
        var machine = waiting(request: 7)
        _ = machine.cancel()
        XCTAssertEqual(machine.cancel(), .none)
        XCTAssertEqual(machine.cancelRequest(), .none)
        XCTAssertEqual(machine, .finished(cancelled: true))
    }

    func testACancellationAfterTheOutcomeResumesNothingButIsRemembered() {
        var machine = waiting(request: 7)
        XCTAssertEqual(machine.complete(), .resume("task"), "the reply, or the timeout")
        XCTAssertEqual(machine.cancel(), .none)
        XCTAssertEqual(machine, .finished(cancelled: true))
        XCTAssertTrue(machine.wasCancelled)
    }

    // MARK: cancelRequest: the request's outcome resumes the task

    func testARequestCancellationCancelsTheAttachedRequestOnceAndTheTaskWaitsOn() {
        var machine = waiting(request: 7)
        XCTAssertEqual(machine.cancelRequest(), .cancelRequest(7))
        XCTAssertEqual(machine, .waitingCancelled("task"))
        XCTAssertFalse(machine.isFinished, "work that started is awaited")
        XCTAssertTrue(machine.wasCancelled)
        XCTAssertEqual(machine.cancelRequest(), .none, "cancelled once")
    }

    func testTheCancelledRequestsOutcomeResumesTheTaskOnceAsCancelled() {
        var machine = waiting(request: 7)
        _ = machine.cancelRequest()
        XCTAssertEqual(machine.complete(), .resume("task"), "it ran, or its release says it did not")
        XCTAssertEqual(machine, .finished(cancelled: true), "so a not-run means CancellationError")
        XCTAssertEqual(machine.complete(), .none)
    }

    func testACancellationAfterARequestCancellationResumesTheTaskAtOnce() {
        var machine = waiting(request: 7)
        _ = machine.cancelRequest()
        XCTAssertEqual(machine.cancel(), .resumeCancelled("task", request: nil), "its request was cancelled already")
        XCTAssertEqual(machine.complete(), .none)
    }

    func testARequestCancellationAfterTheOutcomeResumesNothingButIsRemembered() {
        var machine = waiting(request: 7)
        _ = machine.complete()
        XCTAssertEqual(machine.cancelRequest(), .none)
        XCTAssertTrue(machine.wasCancelled, "a cancellation after the result still counts for a not-run")
    }
}
