import CLinuxPoll
import Glibc
@testable import RunLoopCore
import RunLoopTestSupport
import XCTest

/// Port sources in a running loop, with fake ports (`FakePort`): the pass takes its ready
/// port before the sleep, the timers and the descriptor sources of step 9, any of which may
/// take that port out of the mode, pause it or replace it before its messages are
/// delivered; and a run that returns after one message keeps its port queued only while
/// more wait.
final class ThreadRunLoopPortSourceTests: XCTestCase {
    private let loop = ThreadRunLoop.current

    /// Runs one pass of `mode` without sleeping.
    private func runOnePass(_ mode: LoopMode) {
        _ = loop.run(mode: mode, timeout: .zero, returnAfterSourceHandled: false)
    }

    /// A timer that fires in the first pass of `mode`, before that pass's port delivery.
    private func atFirstTimers(of mode: LoopMode, _ body: @escaping () -> Void) {
        loop.add(LoopTimer(fireAt: .now()) { _ in body() }, to: mode)
    }

    func testARunThatReturnsAfterOneMessageLeavesThePortQueuedWhileMoreWaitAndTakesItOffAfterTheLast() throws {
        let mode = LoopMode("one-a-run-\(#line)")
        let port = try FakePort(waiting: 3) // its descriptor never signalled: only the queue brings them
        loop.addItem(.port(port), binding: nil, to: mode)
        for count in 1...3 {
            XCTAssertEqual(loop.run(mode: mode, timeout: .seconds(10), returnAfterSourceHandled: true), .handledSource)
            XCTAssertEqual(port.delivered, count)
            XCTAssertEqual(loop.isQueuedAsReady(port), count < 3, "asked after message \(count) of 3")
        }
        loop.removeItem(.port(port), from: mode)
    }

    func testAPortThatCannotBeAskedStaysQueuedAfterARunsOneMessageUntilAReceiveFindsItDrained() throws {
        let mode = LoopMode("not-asked-\(#line)")
        let port = try FakePort(waiting: 1)
        port.canAskInsteadOfDraining = false // as a requester's connection
        loop.addItem(.port(port), binding: nil, to: mode)
        XCTAssertEqual(loop.run(mode: mode, timeout: .seconds(10), returnAfterSourceHandled: true), .handledSource)
        XCTAssertTrue(loop.isQueuedAsReady(port), "not asked: its next receive finds out")
        runOnePass(mode)
        XCTAssertEqual(port.delivered, 1)
        XCTAssertFalse(loop.isQueuedAsReady(port), "the receive found it drained")
        loop.removeItem(.port(port), from: mode)
    }

    func testAPortTakenOutOfTheLoopBeforeItsTurnInThePassDeliversNothing() throws {
        let mode = LoopMode("removed-\(#line)")
        let port = try FakePort(waiting: 1)
        loop.addItem(.port(port), binding: nil, to: mode) // queued as ready: the pass takes it first
        atFirstTimers(of: mode) { [loop] in loop.removeItem(.port(port), from: mode) }
        runOnePass(mode)
        XCTAssertEqual(port.delivered, 0, "it left the loop before its turn")
        XCTAssertFalse(loop.isQueuedAsReady(port))
    }

    func testAPortPausedBeforeItsTurnInThePassDeliversNothingUntilResumed() throws {
        let mode = LoopMode("paused-\(#line)")
        let port = try FakePort(waiting: 1)
        loop.addItem(.port(port), binding: nil, to: mode)
        atFirstTimers(of: mode) { [loop] in loop.setPaused(port, true) }
        runOnePass(mode)
        XCTAssertEqual(port.delivered, 0, "back-pressure holds from the moment it is asked for")

        loop.setPaused(port, false)
        XCTAssertEqual(loop.run(mode: mode, timeout: .seconds(10), returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(port.delivered, 1)
        loop.removeItem(.port(port), from: mode)
    }

    func testAPortTakenOutOfTheRunningModeBeforeItsTurnWaitsForItsOtherMode() throws {
        let running = LoopMode("running-\(#line)"), other = LoopMode("other-\(#line)")
        let port = try FakePort(waiting: 1)
        loop.addItem(.port(port), binding: nil, to: running)
        loop.addItem(.port(port), binding: nil, to: other)
        atFirstTimers(of: running) { [loop] in loop.removeItem(.port(port), from: running) }
        runOnePass(running)
        XCTAssertEqual(port.delivered, 0, "no longer in the running mode")
        XCTAssertTrue(loop.isQueuedAsReady(port), "still queued, for its other mode")

        XCTAssertEqual(loop.run(mode: other, timeout: .seconds(10), returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(port.delivered, 1)
        loop.removeItem(.port(port), from: other)
    }

    func testAPortReplacedBeforeItsTurnByANewOneOnTheSameDescriptorNumberDeliversNothingAndTheNewOneIsServed() throws {
        let mode = LoopMode("replaced-\(#line)")
        let old = try FakePort(waiting: 1)
        loop.addItem(.port(old), binding: nil, to: mode)
        var new: FakePort?
        atFirstTimers(of: mode) { [loop] in
            loop.removeItem(.port(old), from: mode)
            old.closeDescriptor() // its socket closed: the number is free
            do {
                let replacement = try FakePort(reusing: old.pollDescriptor, waiting: 1)
                loop.addItem(.port(replacement), binding: nil, to: mode)
                new = replacement
            } catch {
                XCTFail("no replacement port: \(error)")
            }
        }
        XCTAssertEqual(loop.run(mode: mode, timeout: .seconds(10), returnAfterSourceHandled: true), .handledSource)
        let replacement = try XCTUnwrap(new)
        XCTAssertEqual(replacement.pollDescriptor, old.pollDescriptor)
        XCTAssertEqual(old.delivered, 0, "the port the pass took first had left before its turn")
        XCTAssertEqual(replacement.delivered, 1, "the new port on its descriptor number is served")
        loop.removeItem(.port(replacement), from: mode)
    }
}
