import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// What a peer can make a port hold (`docs/security.md`, "Bounded peers"): a frame over the
/// port's limit ends the peer's connection before its bytes are read, and a connection that
/// never completes its handshake is closed after the port's handshake timeout. The peer is
/// `Tests/peers/limits_peer.py`, raw ZMTP on Python's socket module.
final class PeerLimitTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    /// A port bound to tcp loopback with `limits`, added to this thread's loop; its address
    /// is no alias of the port, so that senders here reach it over tcp as a peer would.
    private func tcpPort(_ limits: LocalPort.PeerLimits, received: @escaping (String) -> Void = { _ in })
        throws -> (LocalPort, PortAddress) {
        let port = try LocalPort(peerLimits: limits) { message in
            received(message.text ?? "")
            return nil
        }
        let address = try port.bind(tcp: "tcp://127.0.0.1:*")
        PortDirectory.shared.removeAlias(address)
        loop.add(port, to: .default)
        addTeardownBlock { port.invalidate() }
        return (port, address)
    }

    /// Runs the raw peer against `address` with `arguments` while this thread's loop serves
    /// its ports, until it exits (at most 60 s); returns its one-line verdict.
    private func runRawPeer(_ address: PortAddress, _ arguments: [String],
                            file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let script = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent() // RunLoopKitTests
            .deletingLastPathComponent() // Tests
            .appendingPathComponent("peers/limits_peer.py").path
        let portNumber = String(address.rawValue.split(separator: ":").last ?? "")
        let peer = try SpawnedProcess(["/usr/bin/python3", script, "--host", "127.0.0.1", "--port", portNumber] + arguments,
                                      reapedByCaller: true)
        var exit: ChildExit?
        let source = try ChildProcessSource(pid: peer.pid) { exit = $0 }
        loop.add(source, to: .default)
        if !runCurrentLoop(safetyNet: .seconds(60), until: { exit != nil }) {
            kill(peer.pid, SIGKILL)
            _ = runCurrentLoop(safetyNet: .seconds(10)) { exit != nil }
            XCTFail("the raw peer did not exit within 60 s", file: file, line: line)
        }
        source.invalidate()
        peer.waitForOutput()
        XCTAssertEqual(exit, .exited(0), "the raw peer failed: \(peer.stdout) \(peer.stderr)", file: file, line: line)
        return peer.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Sends `text` to `address` from another thread (a connection of its own, over tcp)
    /// while this thread's loop serves the port, until `delivered` holds.
    private func send(_ text: String, to address: PortAddress, until delivered: () -> Bool) -> Bool {
        let failure = LockedValue<PortError?>(nil)
        let sender = TestThread {
            do { try RemotePort(address).send(LoopMessage(id: 1, text: text), timeout: .seconds(20)) } catch {
                failure.withLock { $0 = error as? PortError }
            }
        }
        let arrived = runCurrentLoop(safetyNet: .seconds(30)) { delivered() || failure.withLock { $0 != nil } }
        sender.join()
        XCTAssertNil(failure.withLock { $0 })
        return arrived && delivered()
    }

    func testAPortSetsItsFrameLimitAndHandshakeTimeoutOnItsSocket() throws {
        let port = try LocalPort { _ in nil }
        defer { port.invalidate() }
        XCTAssertEqual(try port.socket.option(.maxMessageSize), 64 << 20, "the wire format's frame limit")
        XCTAssertEqual(try port.socket.option(.handshakeInterval), 10_000, "10 s, not libzmq's 30 s")

        let limited = try LocalPort(peerLimits: .init(maxFrameBytes: 4096, handshakeTimeout: .milliseconds(1500))) { _ in nil }
        defer { limited.invalidate() }
        XCTAssertEqual(try limited.socket.option(.maxMessageSize), 4096)
        XCTAssertEqual(try limited.socket.option(.handshakeInterval), 1500)

        XCTAssertEqual(LocalPort.PeerLimits(maxFrameBytes: 1 << 40).maxFrameBytes, 64 << 20, "never past the wire format's")
        XCTAssertEqual(LocalPort.PeerLimits(handshakeTimeout: .zero).handshakeMilliseconds, 1, "0 would be never")
        XCTAssertEqual(LocalPort.PeerLimits(handshakeTimeout: .microseconds(1500)).handshakeMilliseconds, 2)
        XCTAssertEqual(LocalPort.PeerLimits(handshakeTimeout: .seconds(Int64.max)).handshakeMilliseconds, .max)
    }

    func testAConnectionThatNeverCompletesItsHandshakeIsClosedAfterThePortsHandshakeTimeout() throws {
        let (_, address) = try tcpPort(.init(handshakeTimeout: .milliseconds(500)))
        let verdict = try runRawPeer(address, ["--wait", "20", "silent"])
        guard verdict.hasPrefix("closed "), let seconds = Double(verdict.dropFirst("closed ".count)) else {
            return XCTFail("the silent connection was not closed within 20 s: \(verdict)")
        }
        XCTAssertGreaterThanOrEqual(seconds, 0.45, "closed by the handshake timer, not before")
        XCTAssertLessThan(seconds, 15)
    }

    func testAPeerThatAnnouncesAFrameOverThePortsLimitIsDisconnectedAndThePortLives() throws {
        var received: [String] = []
        let (port, address) = try tcpPort(.init(maxFrameBytes: 65536)) { received.append($0) }
        XCTAssertTrue(try runRawPeer(address, ["--wait", "20", "oversized", "65537"]).hasPrefix("closed "),
                      "a frame one byte over the limit ends the connection at its header")
        // A frame of exactly the limit is read: the connection waits for its bytes.
        XCTAssertEqual(try runRawPeer(address, ["--wait", "1", "oversized", "65536"]), "open")

        XCTAssertTrue(send("still here", to: address) { !received.isEmpty }, "the port lives and serves a new peer")
        XCTAssertEqual(received, ["still here"])
        XCTAssertTrue(port.isValid)
        XCTAssertEqual(port.statistics.messagesReceived, 1, "the cut-off frame was neither delivered nor counted")
    }
}
