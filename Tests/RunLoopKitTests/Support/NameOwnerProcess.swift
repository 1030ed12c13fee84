import Foundation
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

    /// Removes what a killed owner of `name` leaves (its socket and lock files) once the
    /// test ends. The block captures only paths: XCTest keeps its blocks until exit, and
    /// with them what they hold.
    func removeNameFilesAtTearDown(of name: String) throws {
        let directory = try RuntimeDirectory.path()
        addTeardownBlock {
            try? FileManager.default.removeItem(atPath: "\(directory)/\(name).sock")
            try? FileManager.default.removeItem(atPath: "\(directory)/\(name).lock")
        }
    }
}
