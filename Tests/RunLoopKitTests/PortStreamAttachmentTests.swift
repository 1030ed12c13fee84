@testable import RunLoopCore // for the core internal it reads: whether the loop has the port paused
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// The owner-thread side of a message stream: the port it pauses is never left paused once
/// the stream lets it go.
final class PortStreamAttachmentTests: XCTestCase {
    private let mode = LoopMode("attachment-test")
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    /// A handler that takes the port over while the stream has it paused (its buffer full)
    /// gets the messages that waited: the stream's pause does not outlive the stream.
    func testAHandlerThatTakesOverAPausedPortGetsTheMessagesThatWaited() throws {
        let port = try LocalPort(receiveHighWaterMark: 100)
        loop.add(port, to: mode)
        let stream = port.messages(bufferingPolicy: .bounded(2))
        for id in Int32(0)..<6 { try port.send(LoopMessage(id: id)) }
        for _ in 0..<2 { XCTAssertTrue(loop.run(mode: mode, before: .after(.seconds(10)))) }
        XCTAssertTrue(loop.isPaused(port), "the full buffer paused the port")
        var taken: [Int32] = []
        port.handler = .returning { message in taken.append(message.id); return nil } // ends the stream
        XCTAssertTrue(runCurrentLoop(in: mode) { taken == [2, 3, 4, 5] }, "the new handler got \(taken)")
        XCTAssertFalse(loop.isPaused(port))
        withExtendedLifetime(stream) {}
        port.invalidate()
    }
}
