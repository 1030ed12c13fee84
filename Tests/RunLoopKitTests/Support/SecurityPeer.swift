import Dispatch
import Foundation
import Glibc
@testable import RunLoopCore
@testable import RunLoopKit
@testable import RunLoopSystem
import XCTest

/// How a run of `Tests/peers/security_peer.py` (a client process) ended.
struct SecurityPeerRun {
    let pid: Int32
    let status: Int32
    let stdout: String
    let stderr: String

    /// The peer's one-line verdict: "reply <text>" or "refused <status>".
    var verdict: String { stdout.trimmingCharacters(in: .whitespacesAndNewlines) }
}

/// Runs the security peer (Debian's Python with pyzmq) with `arguments`, while this
/// thread's loop serves its ports in the default mode, until the peer exits (at most 60 s).
/// Fails, never skips, when pyzmq is missing: `scripts/install-dependencies.sh` installs it.
func runSecurityPeer(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws -> SecurityPeerRun {
    let python = "/usr/bin/python3" // Debian's, which python3-zmq serves
    let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent() // Support
        .deletingLastPathComponent() // RunLoopKitTests
        .deletingLastPathComponent() // Tests
        .appendingPathComponent("peers/security_peer.py").path
    let loop = ThreadRunLoop.current
    let exited = LockedValue(false)
    let exitSource = InputSource {}
    loop.add(exitSource, to: .default)
    defer { exitSource.invalidate() }
    let peer = Process()
    peer.executableURL = URL(fileURLWithPath: python)
    peer.arguments = [script] + arguments
    let output = Pipe()
    let errors = Pipe()
    peer.standardOutput = output
    peer.standardError = errors
    peer.terminationHandler = { _ in
        exited.withLock { $0 = true }
        exitSource.signalAndWake()
    }
    try peer.run()
    let finished = runCurrentLoop(safetyNet: .seconds(60)) { exited.withLock { $0 } }
    if !finished {
        peer.terminate()
        peer.waitUntilExit()
    }
    let run = SecurityPeerRun(
        pid: peer.processIdentifier, status: peer.terminationStatus,
        stdout: String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
        stderr: String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    XCTAssertTrue(finished, "the security peer did not exit within 60 s: \(run)", file: file, line: line)
    XCTAssertEqual(run.status, 0, "the security peer failed (is python3-zmq installed?): \(run)", file: file, line: line)
    return run
}
