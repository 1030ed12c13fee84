import Dispatch
import Foundation
import Glibc
@testable import RunLoopKit
@testable import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// `exit-flush-probe` running, with its output read line by line as it comes. Spawned with
/// `posix_spawn` and reaped by a thread of its own, not Foundation's `Process` (which keeps
/// itself and its pipes alive on Linux: LeakSanitizer reports them).
final class ProbeProcess: @unchecked Sendable {
    let pid: pid_t
    private let output = LockedValue((stdout: "", stderr: ""))
    private let lines = DispatchSemaphore(value: 0)
    private let exited = DispatchSemaphore(value: 0)
    private let exitStatus = LockedValue<Int32?>(nil)
    private var threads: [TestThread] = []

    init(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        let path = try builtExecutable("exit-flush-probe")
        let environment = ProcessInfo.processInfo.environment.merging(
            ["RUNLOOPKIT_RUNTIME_DIR": try RuntimeDirectory.path()]) { $1 }
        var stdoutPipe: [Int32] = [0, 0]
        var stderrPipe: [Int32] = [0, 0]
        guard pipe(&stdoutPipe) == 0, pipe(&stderrPipe) == 0 else { throw SystemCallError(call: "pipe", errno: errno) }
        for descriptor in stdoutPipe + stderrPipe { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdoutPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, stderrPipe[1], 2)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, nil, argv, envp)
        close(stdoutPipe[1])
        close(stderrPipe[1])
        guard rc == 0 else {
            close(stdoutPipe[0])
            close(stderrPipe[0])
            throw SystemCallError(call: "posix_spawn", errno: rc)
        }
        self.pid = pid
        for (descriptor, isStdout) in [(stdoutPipe[0], true), (stderrPipe[0], false)] {
            threads.append(TestThread { [output, lines] in
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                    if count < 0 && errno == EINTR { continue }
                    if count <= 0 { break }
                    let text = String(decoding: buffer[0..<count], as: UTF8.self)
                    output.withLock { isStdout ? ($0.stdout += text) : ($0.stderr += text) }
                    if isStdout { lines.signal() }
                }
                close(descriptor)
            })
        }
        threads.append(TestThread { [exitStatus, exited, pid] in
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            // The exit status, or 128 + the signal that ended it, as a shell reports it.
            let code = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + status & 0x7f
            exitStatus.withLock { $0 = code }
            exited.signal()
        })
    }

    var stdout: String { output.withLock { $0.stdout } }
    var stderr: String { output.withLock { $0.stderr } }
    var hasExited: Bool { exitStatus.withLock { $0 != nil } }

    /// Waits (60 s at most) until the child printed `line`.
    func waitForLine(_ line: String) -> Bool {
        let limit = DispatchTime.now() + 60
        while !stdout.split(separator: "\n").contains(Substring(line)) {
            if lines.wait(timeout: limit) == .timedOut { return false }
        }
        return true
    }

    /// Waits (60 s at most) for the child to exit and its output to end; its exit status
    /// (128 + the signal if one ended it), or -1 if it did not exit.
    func waitForExit() -> Int32 {
        guard exited.wait(timeout: .now() + 60) == .success else { return -1 }
        exited.signal() // for the next caller
        for thread in threads { thread.join() }
        return exitStatus.withLock { $0 } ?? -1
    }

    deinit {
        if !hasExited { kill(pid, SIGKILL) }
        _ = waitForExit()
    }
}
