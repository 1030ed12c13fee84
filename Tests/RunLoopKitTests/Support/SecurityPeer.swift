import Foundation
import Glibc
@testable import RunLoopCore
@testable import RunLoopKit
@testable import RunLoopSystem
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

/// Runs the security peer (Debian's Python with pyzmq) with `arguments`, while this
/// thread's loop serves its ports in the default mode, until the peer exits (at most 60 s;
/// then it is killed). Spawned with `posix_spawn` and watched by a `ChildProcessSource`, its
/// output in files. Fails, never skips, when pyzmq is missing (`scripts/install-dependencies.sh`).
func runSecurityPeer(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws -> SecurityPeerRun {
    let python = "/usr/bin/python3" // Debian's, which python3-zmq serves
    let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent() // Support
        .deletingLastPathComponent() // RunLoopKitTests
        .deletingLastPathComponent() // Tests
        .appendingPathComponent("peers/security_peer.py").path
    let stem = "/tmp/runloopkit-security-peer-\(getpid())-\(UInt32.random(in: .min ... .max))"
    let (outputPath, errorPath) = (stem + ".out", stem + ".err")
    defer { unlink(outputPath); unlink(errorPath) }

    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    let argv: [UnsafeMutablePointer<CChar>?] = ([python, script] + arguments).map { strdup($0) } + [nil]
    defer { for argument in argv { free(argument) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, python, &actions, nil, argv, environ)
    guard spawned == 0 else { throw SystemCallError(call: "posix_spawn(\(python))", errno: spawned) }

    var exit: ChildExit?
    let source = try ChildProcessSource(pid: pid) { exit = $0 }
    ThreadRunLoop.current.add(source, to: .default)
    let finished = runCurrentLoop(safetyNet: .seconds(60)) { exit != nil }
    if !finished {
        kill(pid, SIGKILL)
        _ = runCurrentLoop(safetyNet: .seconds(10)) { exit != nil }
        XCTFail("the security peer did not exit within 60 s", file: file, line: line)
    }
    source.invalidate()
    /// A file's text, read with read(2): Foundation's `String(contentsOfFile:)` leaks its
    /// buffer on an empty file (LeakSanitizer sees it).
    func contents(_ path: String) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes += buffer[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
    let run = SecurityPeerRun(pid: pid, exit: exit, stdout: contents(outputPath), stderr: contents(errorPath))
    XCTAssertEqual(run.exit, .exited(0), "the security peer failed (is python3-zmq installed?): \(run)", file: file, line: line)
    return run
}
