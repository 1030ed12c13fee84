import Dispatch
import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// The wire format from another language: `Tests/peers/pyzmq_peer.py`, written from
/// `docs/wire-format.md` with pyzmq alone, checks in with a named port (the guide's
/// Listings 3-16 to 3-19) and makes a request of it.
final class PyZMQPeerTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    private static let peerScript = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent() // RunLoopKitTests
        .deletingLastPathComponent() // Tests
        .appendingPathComponent("peers/pyzmq_peer.py")

    func testAPythonPyZMQPeerChecksInAndCompletesARequestReplyWithANamedPort() throws {
        guard pythonCanImportZMQ() else {
            return XCTFail("\(Self.python) cannot import zmq: run `sh scripts/install-dependencies.sh` (Debian's python3-zmq)")
        }
        let suffix = "\(getpid())-\(UInt32.random(in: .min ... .max))"
        let mainName = "pytest-main-\(suffix)"
        let workerName = "pytest-worker-\(suffix)"
        let directory = try RuntimeDirectory.path() // the peer must use the same directory
        let workerAddress = "ipc://\(directory)/\(workerName).sock"

        var checkIn: LoopMessage?
        var answers: [String] = []
        var requests: [LoopMessage] = []
        var done = false
        struct JobRefused: Error, CustomStringConvertible {
            let job: String
            var description: String { "job refused: \(job)" }
        }
        let port = try LocalPort(name: mainName) { message in
            switch message.id {
            case 100: checkIn = message
            case 2: answers.append(message.text ?? "?")
            case 3: done = true
            case 7:
                requests.append(message)
                // On the wire the reply carries the request's id (7) whatever id this
                // returns (docs/wire-format.md, "Requests and replies"); the peer checks it.
                return LoopMessage(id: 8, components: [.data(Array("pong:".utf8) + (message.data.first ?? []))])
            case 9: throw JobRefused(job: message.text ?? "?") // the peer checks the failure it gets
            default: XCTFail("unexpected message \(message.id) from the peer")
            }
            return nil
        }
        loop.add(port, to: .default)
        defer {
            port.invalidate()
            unlink("\(directory)/\(workerName).sock") // if the peer could not remove it
        }

        // The peer's exit wakes this loop, so that a failing peer fails the test at once.
        var peerExited = false
        let exitSource = InputSource { peerExited = true }
        loop.add(exitSource, to: .default)
        defer { exitSource.invalidate() }

        let peer = Process()
        peer.executableURL = URL(fileURLWithPath: Self.python)
        peer.arguments = [Self.peerScript.path,
                          "--runtime-dir", directory, "--main-name", mainName, "--worker-name", workerName]
        let output = Pipe()
        let errors = Pipe()
        peer.standardOutput = output
        peer.standardError = errors
        let exited = DispatchSemaphore(value: 0)
        peer.terminationHandler = { _ in
            exitSource.signalAndWake()
            exited.signal()
        }
        try peer.run()
        defer {
            if peer.isRunning {
                peer.terminate()
                peer.waitUntilExit()
            }
        }
        /// How the peer ended and what it said; ends it first if it is still running.
        func peerReport() -> String {
            if peer.isRunning {
                peer.terminate()
                peer.waitUntilExit()
            }
            let said = [output, errors].map {
                String(decoding: $0.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            }
            return "peer exit status \(peer.terminationStatus); stdout: \(said[0]); stderr: \(said[1])"
        }

        // (a) The check-in: the peer's port arrives as a port component.
        guard runCurrentLoop(safetyNet: .seconds(30), until: { checkIn != nil || peerExited }), let worker = checkIn?.ports.first else {
            return XCTFail("no check-in with a port from the peer; \(peerReport())")
        }
        try worker.send(LoopMessage(id: 1, text: "job-42"))

        // The answer (2), the peer's requests (7, answered by the handler; 9, whose handler
        // throws), then "done" (3).
        guard runCurrentLoop(safetyNet: .seconds(30), until: { done || (peerExited && peer.terminationStatus != 0) }), done else {
            return XCTFail("the peer did not finish; \(peerReport())")
        }
        waitOrFail(exited, seconds: 30, "the peer to exit")
        let report = peerReport()
        XCTAssertEqual(peer.terminationStatus, 0, report)
        XCTAssertTrue(report.contains("pyzmq peer ok"), report)

        XCTAssertEqual(worker.address.rawValue, workerAddress)
        XCTAssertEqual(checkIn?.replyPort?.address.rawValue, workerAddress)
        XCTAssertEqual(answers, ["JOB-42"])
        // (b) The request/replies, from a DEALER and from a REQ socket: the peer checked
        // each reply (kind, correlation id, data), read from the socket the request left by.
        XCTAssertEqual(requests.map(\.text), ["ping", "ping"])
        XCTAssertEqual(requests.map(\.replyPort), [nil, nil], "a requester needs no port of its own")
        XCTAssertEqual(port.statistics.messagesReceived, 6)
        XCTAssertEqual(port.statistics.handlerErrors, 1)
        XCTAssertEqual(port.statistics.messagesDropped, 0)
        XCTAssertEqual(port.statistics.repliesFailed, 0)
    }

    /// Debian's Python, which `scripts/install-dependencies.sh` gives pyzmq (`python3-zmq`);
    /// not whatever `python3` comes first on the PATH.
    private static let python = "/usr/bin/python3"

    /// Whether Debian's Python is there and has pyzmq.
    private func pythonCanImportZMQ() -> Bool {
        let check = Process()
        check.executableURL = URL(fileURLWithPath: Self.python)
        check.arguments = ["-c", "import zmq"]
        check.standardOutput = FileHandle.nullDevice
        check.standardError = FileHandle.nullDevice
        do { try check.run() } catch { return false }
        check.waitUntilExit()
        return check.terminationStatus == 0
    }
}
