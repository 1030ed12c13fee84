import Foundation
import Glibc
import RunLoopSystem
import XCTest

/// How a child process ended, and what it printed.
package struct CapturedRun {
    /// Its exit status, or nil if a signal ended it.
    package let exitStatus: Int32?
    /// The signal that ended it, or nil if it exited.
    package let signal: Int32?
    package let stdout: String
    package let stderr: String
}

/// Runs `arguments` (a path and its arguments) to its exit with `posix_spawn`, with this
/// process's environment and `environment` added (or `environment` alone), and returns
/// how it ended and what it printed. (Not Foundation's `Process`, which reaps every child
/// and whose objects LeakSanitizer reports.)
package func runCapturing(_ arguments: [String], environment: [String: String] = [:], inheritEnvironment: Bool = true,
                  file: StaticString = #filePath, line: UInt = #line) throws -> CapturedRun {
    var merged = inheritEnvironment ? ProcessInfo.processInfo.environment : [:]
    merged.merge(environment) { $1 }
    let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    let envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { for pointer in argv + envp { free(pointer) } }
    var output: [Int32] = [0, 0], errors: [Int32] = [0, 0]
    try systemCall("pipe") { pipe(&output) }
    try systemCall("pipe") { pipe(&errors) }
    // Close-on-exec, so that no other child spawned meanwhile holds a write end open.
    for fd in output + errors { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, output[1], 1)
    posix_spawn_file_actions_adddup2(&actions, errors[1], 2)
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, arguments[0], &actions, nil, argv, envp)
    close(output[1])
    close(errors[1])
    defer { close(output[0]); close(errors[0]) }
    guard spawned == 0 else { throw SystemCallError(call: "posix_spawn(\(arguments[0]))", errno: spawned) }
    // Both pipes are read to their end (the child's exit), stderr on another thread, so
    // that neither fills while the other is read.
    let stderrBytes = LockedValue<[UInt8]>([])
    let errorsFD = errors[0]
    let stderrReader = TestThread { stderrBytes.withLock { $0 = readToEnd(errorsFD) } }
    let stdoutBytes = readToEnd(output[0])
    stderrReader.join()
    var status: Int32 = 0
    _ = try systemCall("waitpid") { waitpid(pid, &status, 0) }
    let exited = status & 0x7f == 0
    return CapturedRun(exitStatus: exited ? (status >> 8) & 0xff : nil, signal: exited ? nil : status & 0x7f,
                       stdout: String(decoding: stdoutBytes, as: UTF8.self),
                       stderr: String(decoding: stderrBytes.withLock { $0 }, as: UTF8.self))
}

private func readToEnd(_ fd: Int32) -> [UInt8] {
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = buffer.withUnsafeMutableBytes { (try? Kernel.read(fd, into: $0)) ?? 0 }
        if count <= 0 { return bytes }
        bytes += buffer[0..<count]
    }
}

/// A test that runs its scenario in a child process: this test binary again, filtered to
/// the same test, with `variable` set to `scenario` in its environment. The child's
/// `setUp()` sees the variable (`childScenario`), runs the scenario, reports on stdout and
/// ends with `_exit` (`endChild`): 0 when everything went as promised. Asserts that the
/// child exited (no signal: no trap, no abort) with 0, and returns its report.
@discardableResult
package func expectPassingChild(_ testCase: XCTestCase, test: String, variable: String, scenario: String,
                        file: StaticString = #filePath, line: UInt = #line) throws -> String {
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    let name = test.hasSuffix("()") ? String(test.dropLast(2)) : test
    // "Module.Class/method": the test binary holds every test target.
    let run = try runCapturing([executable, "\(String(reflecting: type(of: testCase)))/\(name)"],
                               environment: [variable: scenario], file: file, line: line)
    XCTAssertNil(run.signal, "the child was killed by a signal (a trap or an abort):\n\(run.stdout)\n\(run.stderr)",
                 file: file, line: line)
    XCTAssertEqual(run.exitStatus, 0, "the child's report:\n\(run.stdout)", file: file, line: line)
    return run.stdout
}

/// In the child of `expectPassingChild`: the scenario to run, or nil in the parent.
package func childScenario(_ variable: String) -> String? {
    ProcessInfo.processInfo.environment[variable]
}

/// Runs `scenario` on a thread of its own (whose loop is a plain one: the main thread's
/// makes its poll set for Dispatch's main queue at its first run), then ends the child
/// process: exit status 0 if it returned true, else 1.
package func endChild(running scenario: @escaping @Sendable () -> Bool) -> Never {
    let outcome = LockedValue(false)
    TestThread { outcome.withLock { $0 = scenario() } }.join()
    fflush(nil) // every stream: the report on stdout
    _exit(outcome.withLock { $0 } ? 0 : 1)
}

/// Prints a line of a child's report; returns `passed`.
@discardableResult
package func childReport(_ passed: Bool, _ message: String) -> Bool {
    print(passed ? "PASS \(message)" : "FAIL \(message)")
    return passed
}
