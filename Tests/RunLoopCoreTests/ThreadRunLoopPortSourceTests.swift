import CLinuxPoll
import Glibc
@testable import RunLoopCore
import XCTest

/// Port sources in a running loop, with fake ports: the pass takes its ready port before
/// the sleep, the timers and the descriptor sources of step 9, any of which may take that
/// port out of the mode, pause it or replace it before its messages are delivered; and a
/// run that returns after one message keeps its port queued only while more wait.
final class ThreadRunLoopPortSourceTests: XCTestCase {
    /// A port source with a count of waiting messages; its descriptor is an eventfd.
    private final class CountingPort: PortSourceDriver {
        let pollDescriptor: Int32
        /// Messages waiting to be received.
        var waiting: Int
        var canAskInsteadOfDraining = true
        private(set) var delivered = 0
        private var isClosed = false

        init(waiting: Int = 0) throws {
            pollDescriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
            if pollDescriptor < 0 { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            self.waiting = waiting
        }

        /// A port whose descriptor takes the number `number` (closed before, its number free).
        init(reusing number: Int32, waiting: Int) throws {
            let fd = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
            if fd < 0 { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            if fd != number { // the lowest free number may be a lower one
                defer { close(fd) }
                guard dup2(fd, number) == number else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            }
            pollDescriptor = number
            self.waiting = waiting
        }

        deinit { closeDescriptor() }

        /// Closes the descriptor now, as a port's socket closes (its number may then be reused).
        func closeDescriptor() {
            guard !isClosed else { return }
            isClosed = true
            close(pollDescriptor)
        }

        func hasPendingMessage() -> Bool { waiting > 0 }

        func handleOneMessage() -> PortDelivery {
            var signal: UInt64 = 0
            _ = read(pollDescriptor, &signal, 8) // taken with the message, as libzmq's mailbox is
            guard waiting > 0 else { return .empty }
            waiting -= 1
            delivered += 1
            return .delivered
        }

        func detachedFromLoop() {}
    }

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
        let port = try CountingPort(waiting: 3) // its descriptor never signalled: only the queue brings them
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
        let port = try CountingPort(waiting: 1)
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
        let port = try CountingPort(waiting: 1)
        loop.addItem(.port(port), binding: nil, to: mode) // queued as ready: the pass takes it first
        atFirstTimers(of: mode) { [loop] in loop.removeItem(.port(port), from: mode) }
        runOnePass(mode)
        XCTAssertEqual(port.delivered, 0, "it left the loop before its turn")
        XCTAssertFalse(loop.isQueuedAsReady(port))
    }

    func testAPortPausedBeforeItsTurnInThePassDeliversNothingUntilResumed() throws {
        let mode = LoopMode("paused-\(#line)")
        let port = try CountingPort(waiting: 1)
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
        let port = try CountingPort(waiting: 1)
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
        let old = try CountingPort(waiting: 1)
        loop.addItem(.port(old), binding: nil, to: mode)
        var new: CountingPort?
        atFirstTimers(of: mode) { [loop] in
            loop.removeItem(.port(old), from: mode)
            old.closeDescriptor() // its socket closed: the number is free
            do {
                let replacement = try CountingPort(reusing: old.pollDescriptor, waiting: 1)
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
