@testable import RunLoopKit
import XCTest

/// A worker's life, starting → running → stopping → stopped, as pure transitions over a
/// stand-in thread: which stop requests the exit, cancels the queued work, and joins,
/// waits or detaches the thread it holds.
final class WorkerControlLifecycleTests: XCTestCase {
    private typealias L = WorkerControl.Lifecycle<String>

    private func running() -> L {
        var lifecycle = L.starting
        lifecycle.started("thread")
        return lifecycle
    }

    func testAStopBeforeTheThreadExistsOrAfterItWasJoinedDoesNothing() {
        for var lifecycle in [L.starting, L.stopped] {
            let before = lifecycle
            let effect = lifecycle.stop(pending: .cancel, by: .caller, onOwnThread: false)
            XCTAssertEqual(effect, L.StopEffect(cancelQueued: false, requestExit: false, then: .none))
            XCTAssertEqual(lifecycle, before)
        }
    }

    func testTheFirstStopFromAnotherThreadRequestsTheExitAndJoinsTheThreadItHolds() {
        var lifecycle = running()
        XCTAssertEqual(lifecycle.state, .running)
        XCTAssertEqual(lifecycle.stop(pending: .run, by: .caller, onOwnThread: false),
                       L.StopEffect(cancelQueued: false, requestExit: true, then: .join("thread")))
        XCTAssertEqual(lifecycle, .stopping("thread", .run, .claimed))
        XCTAssertEqual(lifecycle.pendingWork, .run)
        lifecycle.joined()
        XCTAssertEqual(lifecycle, .stopped)
        XCTAssertEqual(lifecycle.state, .stopped)
    }

    func testOnlyTheFirstStopRequestsTheExitAndLaterOnesWaitForTheJoiner() {
        var lifecycle = running()
        _ = lifecycle.stop(pending: .run, by: .caller, onOwnThread: false)
        XCTAssertEqual(lifecycle.stop(pending: .run, by: .caller, onOwnThread: false),
                       L.StopEffect(cancelQueued: false, requestExit: false, then: .waitForJoiner))
    }

    func testAFirstStopWithCancelCancelsTheQueuedWorkAtOnce() {
        var lifecycle = running()
        XCTAssertEqual(lifecycle.stop(pending: .cancel, by: .requestOnly, onOwnThread: false),
                       L.StopEffect(cancelQueued: true, requestExit: true, then: .none))
        XCTAssertEqual(lifecycle, .stopping("thread", .cancel, .unclaimed))
        XCTAssertEqual(lifecycle.pendingWork, .cancel)
    }

    func testALaterStopMayCancelWhatAnEarlierOneWouldHaveRunButNeverTheReverse() {
        var lifecycle = running()
        _ = lifecycle.stop(pending: .run, by: .requestOnly, onOwnThread: false)
        XCTAssertEqual(lifecycle.stop(pending: .cancel, by: .caller, onOwnThread: false),
                       L.StopEffect(cancelQueued: true, requestExit: false, then: .join("thread")))
        XCTAssertEqual(lifecycle.pendingWork, .cancel)

        var cancelled = running()
        _ = cancelled.stop(pending: .cancel, by: .requestOnly, onOwnThread: false)
        XCTAssertEqual(cancelled.stop(pending: .run, by: .caller, onOwnThread: false),
                       L.StopEffect(cancelQueued: false, requestExit: false, then: .join("thread")))
        XCTAssertEqual(cancelled.pendingWork, .cancel, "a run never overrides a cancel")
        XCTAssertEqual(cancelled.stop(pending: .cancel, by: .caller, onOwnThread: false).cancelQueued, false,
                       "cancelled once is enough")
    }

    func testAStopFromTheWorkersOwnThreadOnlyAsksAndItsReleaseThereDetachesTheThread() {
        var lifecycle = running()
        XCTAssertEqual(lifecycle.stop(pending: .run, by: .caller, onOwnThread: true),
                       L.StopEffect(cancelQueued: false, requestExit: true, then: .none))
        XCTAssertEqual(lifecycle.stop(pending: .run, by: .deinitializer, onOwnThread: true),
                       L.StopEffect(cancelQueued: false, requestExit: false, then: .detach("thread")))
        XCTAssertEqual(lifecycle, .stopping("thread", .run, .detached))
    }

    func testNoThreadIsTakenForWorkButARunningOne() {
        XCTAssertEqual(L.starting.state, .starting)
        XCTAssertEqual(running().state, .running)
        XCTAssertEqual(L.stopping("thread", .run, .claimed).state, .stopping)
        XCTAssertEqual(L.starting.pendingWork, .cancel, "no stop asked to run anything")
        XCTAssertEqual(running().pendingWork, .cancel)
    }
}
