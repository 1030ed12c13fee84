@testable import RunLoopKit
import XCTest

/// A port's life, open → closing → closed: the pure transition, then the port itself.
final class LocalPortLifecycleTests: XCTestCase {
    private typealias L = LocalPort.Lifecycle

    func testInvalidatingAnOpenPortMakesItClosingOnceAndOnlyThenAsksForTheClose() {
        XCTAssertTrue(L.after(.invalidate, from: .open) == (.closing, true))
        XCTAssertTrue(L.after(.invalidate, from: .closing) == (.closing, false))
        XCTAssertTrue(L.after(.invalidate, from: .closed) == (.closed, false))
    }

    func testClosingTearsDownOnceFromOpenOrClosingAndNeverAgain() {
        XCTAssertTrue(L.after(.close, from: .open) == (.closed, true))
        XCTAssertTrue(L.after(.close, from: .closing) == (.closed, true))
        XCTAssertTrue(L.after(.close, from: .closed) == (.closed, false))
    }

    func testAPortInvalidatedFromAnotherThreadIsInvalidAtOnceAndClosedByItsOwnersNextPass() throws {
        let port = try LocalPort()
        ThreadRunLoop.current.add(port, to: .default)
        let invalidated = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            port.invalidate()
            invalidated.signal()
        }
        XCTAssertEqual(invalidated.wait(timeout: .now() + 10), .success)
        XCTAssertFalse(port.isValid, "closing: invalid at once")
        XCTAssertTrue(ThreadRunLoop.current.contains(port, in: .default), "the socket is the owner's: still in its mode")
        _ = ThreadRunLoop.current.run(mode: .default, timeout: .zero, returnAfterSourceHandled: true)
        XCTAssertFalse(ThreadRunLoop.current.contains(port, in: .default), "closed on the owner's thread")
        port.invalidate() // closed: nothing more happens
        XCTAssertFalse(port.isValid)
    }
}
