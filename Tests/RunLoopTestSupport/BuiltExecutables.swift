import Foundation
import RunLoopCore
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

/// Spawns `arguments` (a path and its arguments) with `posix_spawn`, sharing this
/// process's outputs, so that nothing but the test reaps it. Returns its pid (0 and a
/// failure if it could not be spawned).
package func spawnChild(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) -> pid_t {
    do {
        return try SpawnedProcess.spawn(arguments)
    } catch {
        XCTFail("\(error)", file: file, line: line)
        return 0
    }
}

/// How a run of a built executable ended, and what it printed.
package struct ExecutableRun {
    /// Its exit status, or 128 + the signal that ended it.
    package let status: Int32
    package let stdout: String
    package let stderr: String
    package let pid: Int32

    package var json: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) as? [String: Any]
    }
    package var stderrLines: [Substring] { stderr.split(separator: "\n") }
}

/// Runs an executable of this package (see `builtExecutable`) to its exit (120 s at most,
/// then it is killed), with `environment` added to this process's, and returns what it printed.
package func runBuiltExecutable(_ name: String, _ arguments: [String], environment: [String: String] = [:],
                                file: StaticString = #filePath, line: UInt = #line) throws -> ExecutableRun {
    let process = try SpawnedProcess([try builtExecutable(name)] + arguments, environment: environment)
    let exit = process.waitForExit(seconds: 120)
    XCTAssertNotNil(exit, "timed out waiting for \(name) \(arguments) to exit", file: file, line: line)
    return ExecutableRun(status: exit?.shellStatus ?? -1, stdout: process.stdout, stderr: process.stderr, pid: process.pid)
}
