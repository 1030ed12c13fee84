import Dispatch
import Foundation
@testable import RunLoopSystem
import XCTest

/// A test that runs its scenario in a child process: this test binary again, filtered to
/// the same test, with `variable` set to `scenario` in its environment. The child's
/// `setUp()` sees the variable (`childScenario`), runs the scenario, reports on stdout and
/// ends with `_exit` (`endChild`): 0 when everything went as promised. Asserts that the
/// child exited (no signal: no trap, no abort) with 0, and returns its report.
@discardableResult
func expectPassingChild(_ testCase: XCTestCase, test: String, variable: String, scenario: String,
                        file: StaticString = #filePath, line: UInt = #line) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    let name = test.hasSuffix("()") ? String(test.dropLast(2)) : test
    process.arguments = ["RunLoopKitTests.\(type(of: testCase))/\(name)"]
    process.environment = ProcessInfo.processInfo.environment.merging([variable: scenario]) { $1 }
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    let exited = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in exited.signal() }
    try process.run()
    let report = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    try? output.fileHandleForReading.close()
    waitOrFail(exited, seconds: 120, "the child process to exit", file: file, line: line)
    XCTAssertEqual(process.terminationReason, .exit, "the child was killed by a signal (a trap or an abort):\n\(report)",
                   file: file, line: line)
    XCTAssertEqual(process.terminationStatus, 0, "the child's report:\n\(report)", file: file, line: line)
    return report
}

/// In the child of `expectPassingChild`: the scenario to run, or nil in the parent.
func childScenario(_ variable: String) -> String? {
    ProcessInfo.processInfo.environment[variable]
}

/// Runs `scenario` on a thread of its own (whose loop is a plain one: the main thread's
/// makes its poll set for Dispatch's main queue at its first run), then ends the child
/// process: exit status 0 if it returned true, else 1.
func endChild(running scenario: @escaping @Sendable () -> Bool) -> Never {
    let outcome = LockedValue(false)
    TestThread { outcome.withLock { $0 = scenario() } }.join()
    fflush(nil) // every stream: the report on stdout
    _exit(outcome.withLock { $0 } ? 0 : 1)
}

/// Prints a line of a child's report; returns `passed`.
@discardableResult
func childReport(_ passed: Bool, _ message: String) -> Bool {
    print(passed ? "PASS \(message)" : "FAIL \(message)")
    return passed
}
