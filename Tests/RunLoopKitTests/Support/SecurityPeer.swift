import Foundation
import Glibc
import RunLoopCore
import RunLoopTestSupport
import XCTest

/// How a run of `Tests/peers/security_peer.py` (a client process) ended.
struct SecurityPeerRun: CustomStringConvertible {
    let pid: Int32
    let exit: ChildExit?
    let stdout: String
    let stderr: String

    /// The peer's one-line verdict: "reply <text>" or "refused <status>".
    var verdict: String { stdout.trimmingCharacters(in: .whitespacesAndNewlines) }

    var description: String {
        "security peer \(pid): \(exit.map { "\($0)" } ?? "still running"); stdout: \(stdout); stderr: \(stderr)"
    }
}

/// Runs the security peer (Debian's Python with pyzmq), or another peer of `Tests/peers`
/// (`script`, for example the raw-ZMTP `zmtp_forger.py`), with `arguments`, while this
/// thread's loop serves its ports in the default mode, until the peer exits (at most 60 s;
/// then it is killed). Spawned as a `SpawnedProcess` reaped by a `ChildProcessSource`.
/// Fails, never skips, when pyzmq is missing (`scripts/install-dependencies.sh`).
func runSecurityPeer(_ arguments: [String], script: String = "security_peer.py",
                     file: StaticString = #filePath, line: UInt = #line) throws -> SecurityPeerRun {
    let python = "/usr/bin/python3" // Debian's, which python3-zmq serves
    let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent() // Support
        .deletingLastPathComponent() // RunLoopKitTests
        .deletingLastPathComponent() // Tests
        .appendingPathComponent("peers").appendingPathComponent(script).path
    let peer = try SpawnedProcess([python, script] + arguments, reapedByCaller: true)
    var exit: ChildExit?
    let source = try ChildProcessSource(pid: peer.pid) { exit = $0 }
    ThreadRunLoop.current.add(source, to: .default)
    let finished = runCurrentLoop(safetyNet: .seconds(60)) { exit != nil }
    if !finished {
        kill(peer.pid, SIGKILL)
        _ = runCurrentLoop(safetyNet: .seconds(10)) { exit != nil }
        XCTFail("the security peer did not exit within 60 s", file: file, line: line)
    }
    source.invalidate()
    peer.waitForOutput()
    let run = SecurityPeerRun(pid: peer.pid, exit: exit, stdout: peer.stdout, stderr: peer.stderr)
    XCTAssertEqual(run.exit, .exited(0), "the security peer failed (is python3-zmq installed?): \(run)", file: file, line: line)
    return run
}
