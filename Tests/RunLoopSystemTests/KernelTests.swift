import Foundation
import Glibc
@testable import RunLoopSystem
import XCTest

/// The file and descriptor calls' funnel: errors name the call and its path, with the code
/// read at the failure point; the lock calls tell "held by another" from a failure.
final class KernelTests: XCTestCase {
    private func scratchDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "kernel-tests-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        XCTAssertTrue(try Kernel.makeDirectory(path, 0o700))
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    func testAFailedCallNamesTheCallAndThePathWithTheErrnoOfTheFailure() throws {
        let directory = try scratchDirectory()
        XCTAssertThrowsError(try Kernel.unlink("\(directory)/missing")) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: .fileNotFound, call: "unlink(\(directory)/missing)"))
        }
        XCTAssertThrowsError(try Kernel.open("\(directory)/missing", O_RDONLY)) { error in
            XCTAssertEqual((error as? SystemCallError)?.code, .fileNotFound)
        }
    }

    func testMakingADirectoryThatExistsReturnsFalseAndItsStatusSaysDirectory() throws {
        let directory = try scratchDirectory()
        XCTAssertFalse(try Kernel.makeDirectory(directory, 0o700))
        let info = try Kernel.linkStatus(directory)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFDIR)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
        XCTAssertTrue(Kernel.exists(directory))
        XCTAssertFalse(Kernel.exists("\(directory)/nothing"))
    }

    func testAFileOverwrittenReadsBackAndListsInItsDirectory() throws {
        let directory = try scratchDirectory()
        let path = "\(directory)/file"
        let fd = try Kernel.open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode: 0o600)
        defer { Kernel.close(fd) }
        try Kernel.overwrite(fd, with: Array("a longer first text".utf8))
        try Kernel.overwrite(fd, with: Array("12345\n".utf8))
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = try buffer.withUnsafeMutableBytes { try Kernel.pread(fd, into: $0, at: 0) }
        XCTAssertEqual(Array(buffer.prefix(count)), Array("12345\n".utf8), "truncated before it was written")
        XCTAssertEqual(try Kernel.status(fd).st_ino, try Kernel.status(path).st_ino)
        XCTAssertEqual(Set(try Kernel.directoryEntries(directory)), [".", "..", "file"])
        try Kernel.chmod(path, 0o400)
        XCTAssertEqual(try Kernel.status(path).st_mode & 0o777, 0o400)
    }

    func testADirectoryOfThousandsOfEntriesOfEveryNameLengthListsEachNameWhole() throws {
        // Entries as long as their names, many of readdir's buffers: the last entry of each
        // ends where the buffer does, and a listing that copied each entry's whole 256-byte
        // name field read past it (AddressSanitizer: a heap overflow).
        let directory = try scratchDirectory()
        var made: Set<String> = [".", ".."]
        for index in 0..<3000 {
            let name = "e\(index)-" + String(repeating: "n", count: index % 200)
            Kernel.close(try Kernel.open("\(directory)/\(name)", O_RDWR | O_CREAT | O_CLOEXEC, mode: 0o600))
            made.insert(name)
        }
        let listed = try Kernel.directoryEntries(directory)
        XCTAssertEqual(listed.count, made.count)
        XCTAssertEqual(Set(listed), made)
    }

    func testAnExclusiveLockHeldThroughOneOpenFileIsSeenAndRefusedThroughAnother() throws {
        let directory = try scratchDirectory()
        let path = "\(directory)/lock"
        let first = try Kernel.open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode: 0o600)
        let second = try Kernel.open(path, O_RDWR | O_CLOEXEC)
        defer { Kernel.close(second) }
        XCTAssertFalse(try Kernel.isLockedByAnother(second))
        XCTAssertTrue(try Kernel.lockExclusively(first))
        XCTAssertTrue(try Kernel.isLockedByAnother(second))
        XCTAssertFalse(try Kernel.lockExclusively(second), "held through the other open file: refused, not an error")
        Kernel.close(first) // the kernel drops the lock with its open file description
        XCTAssertFalse(try Kernel.isLockedByAnother(second))
        XCTAssertTrue(try Kernel.lockExclusively(second))
    }
}
