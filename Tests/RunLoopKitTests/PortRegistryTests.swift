import Foundation
import Glibc
@testable import RunLoopKit
import XCTest

/// The runtime directory as tools read it: names, owners, liveness.
final class PortRegistryTests: XCTestCase {
    private func uniqueName(_ base: String) -> String { "\(base)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))" }

    func testALivePortIsListedAliveWithThisProcessAsOwner() throws {
        let name = uniqueName("registry-live")
        let port = try LocalPort(name: name)
        let entry = try XCTUnwrap(PortRegistry.registeredNames().first { $0.name == name })
        XCTAssertTrue(entry.isAlive)
        XCTAssertEqual(entry.ownerPID, getpid())
        XCTAssertEqual(entry.address, port.remote.address)
        XCTAssertEqual(try PortRegistry.registration(named: name), entry)
        port.invalidate()
        XCTAssertNil(try PortRegistry.registration(named: name), "a name given back leaves no lock file")
    }

    func testANameWhoseOwnerDiedIsListedDeadWithTheLastOwnersPid() throws {
        let name = uniqueName("registry-dead")
        let directory = try PortRegistry.runtimeDirectory()
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(directory)/\(name).lock", contents: Data("999999\n".utf8)))
        defer { unlink("\(directory)/\(name).lock") }
        let entry = try XCTUnwrap(PortRegistry.registration(named: name))
        XCTAssertFalse(entry.isAlive)
        XCTAssertEqual(entry.ownerPID, 999_999)
        XCTAssertEqual(try PortRegistry.registeredNames().first { $0.name == name }, entry)
    }

    func testANameNobodyRegisteredHasNoEntryAndABadNameIsRejected() {
        XCTAssertNil(try PortRegistry.registration(named: uniqueName("registry-nobody")))
        XCTAssertThrowsError(try PortRegistry.registration(named: "../escape")) {
            guard case .invalidName = $0 as? PortError else { return XCTFail("\($0)") }
        }
    }
}
