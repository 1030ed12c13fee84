import Foundation
import Glibc
import RunLoopCore
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

/// Runs `arguments` (a path and its arguments) to its exit (a `SpawnedProcess`), with this
/// process's environment and `environment` added (or `environment` alone), and returns
/// how it ended and what it printed.
package func runCapturing(_ arguments: [String], environment: [String: String] = [:], inheritEnvironment: Bool = true,
                          file: StaticString = #filePath, line: UInt = #line) throws -> CapturedRun {
    let process = try SpawnedProcess(arguments, environment: environment, inheritEnvironment: inheritEnvironment)
    let exit = process.waitForExit(seconds: nil)
    var (status, signal): (Int32?, Int32?) = (nil, nil)
    switch exit {
    case .exited(let code): status = code
    case .signalled(let number, _): signal = number
    case .statusUnavailable, nil: XCTFail("\(arguments[0]) ended without a status: \(String(describing: exit))", file: file, line: line)
    }
    return CapturedRun(exitStatus: status, signal: signal, stdout: process.stdout, stderr: process.stderr)
}

/// A test that runs its scenario in a child process: this test binary again, filtered to
/// the same test, with `variable` set to `scenario` in its environment. The child's
/// `setUp()` sees the variable (`childScenario`), runs the scenario, reports on stdout and
/// ends with `_exit` (`endChild`): 0 when everything went as promised. Asserts that the
/// child exited (no signal: no trap, no abort) with 0, and returns its report.
@discardableResult
package func expectPassingChild(_ testCase: XCTestCase, test: String, variable: String, scenario: String,
                                file: StaticString = #filePath, line: UInt = #line) throws -> String {
    let run = try runCapturing(childTestArguments(testCase, test: test), environment: [variable: scenario],
                               file: file, line: line)
    XCTAssertNil(run.signal, "the child was killed by a signal (a trap or an abort):\n\(run.stdout)\n\(run.stderr)",
                 file: file, line: line)
    XCTAssertEqual(run.exitStatus, 0, "the child's report:\n\(run.stdout)", file: file, line: line)
    return run.stdout
}

/// The arguments that run this test binary again filtered to `test` (`#function` or its
/// name) of `testCase`'s class: a child process for a scenario (`childScenario`).
package func childTestArguments(_ testCase: XCTestCase, test: String) -> [String] {
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    let name = test.hasSuffix("()") ? String(test.dropLast(2)) : test
    // "Module.Class/method": the test binary holds every test target.
    return [executable, "\(String(reflecting: type(of: testCase)))/\(name)"]
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
