@testable import RunLoopKit
import XCTest

/// The decision every `stop` of a worker or pool makes, case by case: exactly one join or
/// detach per thread, later stoppers wait for the joiner, a thread never joins itself.
final class StopTransitionTests: XCTestCase {
    private typealias T = StopTransition

    func testTheFirstStopFromAnotherThreadClaimsTheJoin() {
        XCTAssertTrue(T.stop(from: nil, by: .caller, onOwnThread: false) == (.claimed, .join))
        XCTAssertTrue(T.stop(from: nil, by: .deinitializer, onOwnThread: false) == (.claimed, .join))
    }

    func testAStopAfterTheJoinWasClaimedWaitsForTheJoiner() {
        XCTAssertTrue(T.stop(from: .claimed, by: .caller, onOwnThread: false) == (.claimed, .waitForJoiner))
    }

    func testAStopFromTheWorkersOwnThreadOnlyAsksAndLeavesTheJoinToAnother() {
        XCTAssertTrue(T.stop(from: nil, by: .caller, onOwnThread: true) == (.unclaimed, .none))
        // ... which the next stop from another thread then claims.
        XCTAssertTrue(T.stop(from: .unclaimed, by: .caller, onOwnThread: false) == (.claimed, .join))
    }

    func testAHandleReleasedOnTheWorkersOwnThreadDetachesItOnce() {
        XCTAssertTrue(T.stop(from: nil, by: .deinitializer, onOwnThread: true) == (.detached, .detach))
        XCTAssertTrue(T.stop(from: .unclaimed, by: .deinitializer, onOwnThread: true) == (.detached, .detach))
        for stopper: T.Stopper in [.caller, .deinitializer, .requestOnly] {
            for own in [false, true] {
                XCTAssertTrue(T.stop(from: .detached, by: stopper, onOwnThread: own) == (.detached, .none),
                              "a detached thread is never joined: \(stopper), own thread \(own)")
            }
        }
    }

    func testARequestOnlyStopNeverJoinsNorWaits() {
        for joining: T.Joining? in [nil, .unclaimed, .claimed, .detached] {
            for own in [false, true] {
                let (_, role) = T.stop(from: joining, by: .requestOnly, onOwnThread: own)
                XCTAssertEqual(role, .none, "\(String(describing: joining)), own thread \(own)")
            }
        }
    }

    func testOnceClaimedNoStopClaimsAgainOrDetaches() {
        for stopper: T.Stopper in [.caller, .deinitializer, .requestOnly] {
            for own in [false, true] {
                let (next, role) = T.stop(from: .claimed, by: stopper, onOwnThread: own)
                XCTAssertEqual(next, .claimed)
                XCTAssertNotEqual(role, .join)
                XCTAssertNotEqual(role, .detach)
            }
        }
    }

    func testTheGateLetsEveryWaiterThroughOnceOpened() {
        let gate = JoinGate()
        let passed = DispatchSemaphore(value: 0)
        for _ in 0..<3 { Thread.detachNewThread { gate.wait(); passed.signal() } }
        gate.open()
        for _ in 0..<3 { XCTAssertEqual(passed.wait(timeout: .now() + 10), .success) }
        gate.wait() // and a late one passes at once
    }
}
