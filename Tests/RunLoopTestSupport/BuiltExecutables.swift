import Dispatch
import Foundation
import Glibc
import RunLoopCore
import RunLoopSystem
import XCTest

/// The path of an executable of this package built next to the test bundle.
///
/// `swift test` builds every product, so a missing one is a failure (thrown), never a
/// skip: it happens only after `swift test --skip-build` following a partial build.
package func builtExecutable(_ name: String) throws -> String {
    var directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    throw MissingExecutable(name: name)
}

/// A product of this package that is not built next to the tests.
package struct MissingExecutable: Error, CustomStringConvertible {
    package let name: String
    package var description: String {
        "\(name) is not built next to the tests: run `swift test` (it builds every product), or `swift build` before `--skip-build`"
    }
}

/// Spawns `arguments` (a path and its arguments) with `posix_spawn`, so that nothing but
/// the test reaps it (Foundation's `Process` would). Returns its pid.
package func spawnChild(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) -> pid_t {
    var pid: pid_t = 0
    let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for argument in argv { free(argument) } }
    XCTAssertEqual(posix_spawn(&pid, arguments[0], nil, nil, argv, environ), 0, file: file, line: line)
    return pid
}

/// How a run of a built executable ended, and what it printed.
package struct ExecutableRun {
    package let status: Int32
    package let stdout: String
    package let stderr: String
    package let pid: Int32

    package var json: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) as? [String: Any]
    }
    package var stderrLines: [Substring] { stderr.split(separator: "\n") }
}

/// Runs an executable of this package (see `builtExecutable`) to its exit, with
/// `environment` added to this process's, and returns what it printed.
package func runBuiltExecutable(_ name: String, _ arguments: [String], environment: [String: String] = [:],
                        file: StaticString = #filePath, line: UInt = #line) throws -> ExecutableRun {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try builtExecutable(name))
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    let exited = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in exited.signal() }
    try process.run()
    // Reading to the end waits for the process to close its outputs (exit); stderr is read
    // on another thread so that neither pipe fills while the other is read.
    let stderrData = LockedValue(Data())
    let stderrReader = TestThread { stderrData.withLock { $0 = errors.fileHandleForReading.readDataToEndOfFile() } }
    let stdout = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    stderrReader.join()
    try? output.fileHandleForReading.close()
    try? errors.fileHandleForReading.close()
    waitOrFail(exited, seconds: 120, "\(name) \(arguments) to exit", file: file, line: line)
    return ExecutableRun(status: process.terminationStatus, stdout: stdout,
                         stderr: String(decoding: stderrData.withLock { $0 }, as: UTF8.self), pid: process.processIdentifier)
}
