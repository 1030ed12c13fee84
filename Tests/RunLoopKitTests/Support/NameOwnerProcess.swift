import Foundation
import RunLoopSystem
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

extension XCTestCase {
    /// Starts the owner of the port name `name` in another process: this test binary again,
    /// filtered to `test`, with `variable` set to `name` in its environment (its `setUp`
    /// serves the name, see `childScenario`, and prints "ready" once it is registered).
    /// Returns it once it is ready. What a killed owner leaves is removed once the test ends
    /// (`removeNameFilesAtTearDown`).
    func startNameOwner(_ name: String, variable: String, test: String,
                        file: StaticString = #filePath, line: UInt = #line) throws -> SpawnedProcess {
        let owner = try SpawnedProcess(childTestArguments(self, test: test), environment: [variable: name])
        XCTAssertTrue(owner.waitForLine("ready"), "the owner did not start: \(owner.stderr)", file: file, line: line)
        try removeNameFilesAtTearDown(of: name)
        return owner
    }

    /// Removes what a killed owner of `name` leaves (its socket, lock, side channel and life files) once the
    /// test ends. The block captures only paths: XCTest keeps its blocks until exit, and
    /// with them what they hold.
    func removeNameFilesAtTearDown(of name: String) throws {
        let directory = try RuntimeDirectory.path()
        addTeardownBlock {
            try? FileManager.default.removeItem(atPath: "\(directory)/\(name).sock")
            try? FileManager.default.removeItem(atPath: "\(directory)/\(name).lock")
            try? FileManager.default.removeItem(atPath: "\(directory)/\(name).fds")
            try? FileManager.default.removeItem(atPath: "\(directory)/\(name).life")
        }
    }
}

/// In `setUp`: when this process is a name owner that `startNameOwner` started (the
/// environment names the port in `variable`), holds that name on this thread's loop with
/// the signal sources `signals` makes for its port, prints "ready", and runs until it is
/// killed (or ends the process with a failed report if it could not start). In the
/// test's own process, returns at once.
func serveNameOwnerInChild(_ variable: String,
                           signals: @escaping @Sendable (_ name: String, LocalPort) throws -> [SignalSource]) {
    guard let name = childScenario(variable) else { return }
    endChild {
        do {
            let loop = ThreadRunLoop.current
            let port = try LocalPort(name: name)
            loop.add(port, to: .default)
            for source in try signals(name, port) { loop.add(source, to: .default) }
            print("ready")
            fflush(nil)
            while true { _ = loop.run(mode: .default, before: .distantFuture) }
        } catch {
            return childReport(false, "the owner could not serve '\(name)': \(error)")
        }
    }
}
