import Glibc
@testable import RunLoopCore
@testable import RunLoopKit
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// The port side of the request lifecycle against a foreign requester: the client role of
/// `Tests/peers/lifecycle_peer.py`, written from `docs/wire-format.md` with pyzmq alone,
/// cancels a request it sent (its right reports it) and one it did not (nothing is cancelled).
final class PortLifecyclePeerTests: XCTestCase {
    private static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("peers/lifecycle_peer.py").path

    /// A named port on its own thread whose deferring handler keeps each right, by message id.
    private func server() -> (LoopThread, LocalPort, SharedValue<[Int32: ReplyRightBox]>) {
        let kept = SharedValue<[Int32: ReplyRightBox]>([:])
        let served = SharedValue<LocalPort?>(nil)
        let thread = LoopThread { loop in
            let port = try! LocalPort(name: "lifecycle-\(getpid())", handling: .deferring { message, right in
                guard let right else { return }
                let box = ReplyRightBox(right)
                kept.withLock { $0[message.id] = box }
            })
            loop.add(port, to: .default)
            served.withLock { $0 = port }
        }
        return (thread, served.withLock { $0! }, kept)
    }

    private func client(_ endpoint: String, messageID: Int32, correlationID: UInt64, _ extra: [String]) throws -> SpawnedProcess {
        try SpawnedProcess(["/usr/bin/python3", Self.script, "client", "--endpoint", endpoint,
                            "--message-id", "\(messageID)", "--correlation-id", "\(correlationID)"] + extra)
    }

    func testAForeignRequestersCancelReachesTheRightOfTheRequestItSent() throws {
        let (thread, port, kept) = server()
        let peer = try client(port.remote.address.rawValue, messageID: 21, correlationID: 5,
                              ["--cancel-after", "0", "--wait", "1"])
        XCTAssertTrue(peer.waitForLine("cancelled 5"), peer.stderr)
        XCTAssertTrue(waitUntil(within: .seconds(30)) { kept.withLock { $0[21]?.isCancelled } == true }, "the right reports the cancel")
        XCTAssertEqual(port.statistics.requestsCancelled, 1)
        kept.withLock { $0[21]?.reply(LoopMessage(id: 0, text: "for nobody")) }
        XCTAssertNotNil(peer.waitForExit())
        XCTAssertFalse(peer.stdout.contains("received"), "nothing is sent for a cancelled request: \(peer.stdout)")
        thread.stop()
    }

    func testAForeignPeerThatCancelsAnotherRequestersCorrelationIDCancelsNothing() throws {
        let (thread, port, kept) = server()
        let endpoint = port.remote.address.rawValue
        let owner = try client(endpoint, messageID: 31, correlationID: 7, ["--wait", "20"])
        XCTAssertTrue(waitUntil(within: .seconds(30)) { kept.withLock { $0[31] } != nil })
        let forger = try client(endpoint, messageID: 32, correlationID: 9,
                                ["--cancel-after", "0", "--cancel-correlation-id", "7", "--wait", "1"])
        XCTAssertTrue(forger.waitForLine("cancelled 7"), forger.stderr)
        XCTAssertTrue(waitUntil(within: .seconds(30)) { (try? thread.loop.performAndWait { thread.loop.counters.messagesDropped[.lateCancel] ?? 0 }) == 1 },
                      "the forged cancel is dropped as late")
        XCTAssertEqual(kept.withLock { $0[31]?.isCancelled }, false, "the owner's request is not cancelled")
        XCTAssertEqual(kept.withLock { $0[32]?.isCancelled }, false, "nor the forger's own")
        kept.withLock { $0[31]?.reply(LoopMessage(id: 0, text: "yours")) }
        XCTAssertTrue(owner.waitForLine("received 2 7 31"), owner.stdout)
        kill(owner.pid, SIGKILL)
        _ = owner.waitForExit()
        _ = forger.waitForExit()
        kept.withLock { $0.removeAll() }
        thread.stop()
    }
}
