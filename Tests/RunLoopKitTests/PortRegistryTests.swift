import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopSystem
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

    #if ERRNO_INJECTION
    /// A name watch wakes at each change of the lock file, and the registration's last step
    /// is one: the pid written, in one write, into the file emptied as the lock was taken
    /// (`docs/wire-format.md`), with no truncation right before it.
    func testARegistrationAnnouncesItsPidInOneWriteWithNoTruncationBeforeIt() throws {
        let recorder = ErrnoInjection() // forces nothing: it records the calls of this thread
        let name = uniqueName("registry-announce")
        let port = try recorder.during { try LocalPort(name: name) }
        defer { port.invalidate() }
        let announcement = try XCTUnwrap(recorder.calls.lastIndex(of: "pwrite"), "\(recorder.calls)")
        XCTAssertNotEqual(recorder.calls[announcement - 1], "ftruncate", "\(recorder.calls)")
        XCTAssertEqual(try PortRegistry.registration(named: name)?.ownerPID, getpid())
    }
    #endif

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
