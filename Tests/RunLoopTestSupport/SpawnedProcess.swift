import Dispatch
import Foundation
import Glibc
import RunLoopCore
import RunLoopSystem

/// A child process started with `posix_spawn`, with its stdout and stderr read by threads
/// of its own as they come. Not Foundation's `Process`: it reaps every child (a
/// `ChildProcessSource` then cannot), and LeakSanitizer reports its objects on Linux.
///
/// A thread of its own reaps the child (`waitForExit`), unless `reapedByCaller`: then the
/// test reaps it (a `ChildProcessSource`, `waitpid`) and `waitForOutput` waits for the end
/// of what it printed.
package final class SpawnedProcess: @unchecked Sendable {
    package let pid: pid_t
    private let reapedByCaller: Bool
    private let output = LockedValue((stdout: [UInt8](), stderr: [UInt8]()))
    private let printed = DispatchSemaphore(value: 0) // signalled for every read of stdout
    private let exited = DispatchSemaphore(value: 0)
    private let exit = LockedValue<ChildExit?>(nil)
    private var threads: [TestThread] = [] // set in init, joined by waitForOutput

    /// Starts `arguments` (a path and its arguments) with this process's environment and
    /// `environment` added (or `environment` alone, without `inheritEnvironment`).
    package init(_ arguments: [String], environment: [String: String] = [:], inheritEnvironment: Bool = true,
                 reapedByCaller: Bool = false) throws {
        var stdoutPipe: [Int32] = [0, 0], stderrPipe: [Int32] = [0, 0]
        // Close-on-exec, so that no other child spawned meanwhile holds a write end open.
        _ = try systemCall("pipe") { pipe(&stdoutPipe) }
        _ = try systemCall("pipe") { pipe(&stderrPipe) }
        for descriptor in stdoutPipe + stderrPipe { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdoutPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, stderrPipe[1], 2)
        let pid: pid_t
        do {
            defer { close(stdoutPipe[1]); close(stderrPipe[1]) }
            pid = try Self.spawn(arguments, environment: environment, inheritEnvironment: inheritEnvironment, actions: &actions)
        } catch {
            close(stdoutPipe[0])
            close(stderrPipe[0])
            throw error
        }
        self.pid = pid
        self.reapedByCaller = reapedByCaller
        for (descriptor, isStdout) in [(stdoutPipe[0], true), (stderrPipe[0], false)] {
            threads.append(TestThread { [output, printed] in
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = buffer.withUnsafeMutableBytes { (try? Kernel.read(descriptor, into: $0)) ?? 0 }
                    if count <= 0 { break }
                    output.withLock { isStdout ? ($0.stdout += buffer[0..<count]) : ($0.stderr += buffer[0..<count]) }
                    if isStdout { printed.signal() }
                }
                close(descriptor)
            })
        }
        if !reapedByCaller {
            threads.append(TestThread { [exit, exited] in
                var status: Int32 = 0
                while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
                let signal = status & 0x7f
                exit.withLock {
                    $0 = signal == 0 ? .exited((status >> 8) & 0xff) : .signalled(signal, coreDumped: status & 0x80 != 0)
                }
                exited.signal()
            })
        }
    }

    /// Spawns `arguments` with `posix_spawn` and `actions` (none: the child shares this
    /// process's stdout and stderr), and returns its pid; nothing reaps it but the caller.
    package static func spawn(_ arguments: [String], environment: [String: String] = [:], inheritEnvironment: Bool = true,
                              actions: UnsafePointer<posix_spawn_file_actions_t>? = nil) throws(SystemCallError) -> pid_t {
        var merged = inheritEnvironment ? ProcessInfo.processInfo.environment : [:]
        merged.merge(environment) { $1 }
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, arguments[0], actions, nil, argv, envp)
        guard spawned == 0 else { throw SystemCallError(call: "posix_spawn(\(arguments[0]))", errno: spawned) }
        return pid
    }

    /// What it printed on stdout so far.
    package var stdout: String { output.withLock { String(decoding: $0.stdout, as: UTF8.self) } }
    /// What it printed on stderr so far.
    package var stderr: String { output.withLock { String(decoding: $0.stderr, as: UTF8.self) } }
    /// Whether it ended (never set when the caller reaps it).
    package var hasExited: Bool { exit.withLock { $0 != nil } }

    /// Waits (60 s at most) until the child printed `line` on stdout.
    package func waitForLine(_ line: String) -> Bool {
        let limit = DispatchTime.now() + 60
        while !stdout.split(separator: "\n").contains(Substring(line)) {
            if printed.wait(timeout: limit) == .timedOut { return false }
        }
        return true
    }

    /// Waits (60 s at most) until the child printed on stdout a line that contains one of
    /// `fragments`, and returns the one the first such line contains, or nil if none came.
    package func waitForFirstLine(containing fragments: [String]) -> String? {
        let limit = DispatchTime.now() + 60
        while true {
            for line in stdout.split(separator: "\n") {
                if let fragment = fragments.first(where: { line.contains($0) }) { return fragment }
            }
            if printed.wait(timeout: limit) == .timedOut { return nil }
        }
    }

    /// Waits (`seconds` at most; nil: as long as it takes) until the child ended and its
    /// output reached its end. How it ended, or nil if it did not end in time.
    package func waitForExit(seconds: Double? = 60) -> ChildExit? {
        precondition(!reapedByCaller, "the caller reaps this child")
        if let seconds {
            guard exited.wait(timeout: .now() + seconds) == .success else { return nil }
        } else {
            exited.wait()
        }
        exited.signal() // for the next caller
        waitForOutput()
        return exit.withLock { $0 }
    }

    /// Waits until the child closed its stdout and stderr (it ended) and, unless the
    /// caller reaps it, until it was reaped.
    package func waitForOutput() {
        for thread in threads { thread.join() }
    }

    /// Kills a child it reaps that is still running. (One the caller reaps must have ended:
    /// this waits for the end of its output.)
    deinit {
        if !reapedByCaller && !hasExited { kill(pid, SIGKILL) }
        waitForOutput()
    }
}

extension ChildExit {
    /// The status as a shell reports it: the exit status, or 128 + the signal that ended it
    /// (-1 if it could not be collected).
    package var shellStatus: Int32 {
        switch self {
        case .exited(let status): status
        case .signalled(let signal, _): 128 + signal
        case .statusUnavailable: -1
        }
    }
}
