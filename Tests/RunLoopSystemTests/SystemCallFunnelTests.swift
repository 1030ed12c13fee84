#if ERRNO_INJECTION
import Foundation
import Glibc
@testable import RunLoopSystem
import XCTest

/// The system-call funnel's retry and failure paths, each forced with `ErrnoInjection`:
/// `EINTR` retried, the rest thrown typed and named after the call, and the wrappers that
/// read an error as an answer (`EEXIST`, `EAGAIN`, `EACCES`, `EINVAL`) reading it so.
final class SystemCallFunnelTests: XCTestCase {
    /// A fresh eventfd (counter 0, blocking), closed at the end of the test.
    private func eventDescriptor() throws -> Int32 {
        let fd = try Kernel.eventDescriptor()
        addTeardownBlock { Kernel.close(fd) }
        return fd
    }

    private func add(_ value: UInt64, to fd: Int32) throws -> Int {
        try withUnsafeBytes(of: value) { try Kernel.write(fd, $0) }
    }

    private func readCounter(_ fd: Int32) throws -> UInt64 {
        var value: UInt64 = 0
        _ = try withUnsafeMutableBytes(of: &value) { try Kernel.read(fd, into: $0) }
        return value
    }

    private func scratchDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "funnel-tests-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        XCTAssertTrue(try Kernel.makeDirectory(path, 0o700))
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    func testAnInterruptedCallIsRetriedUntilItIsMadeAndItsResultReturned() throws {
        let fd = try eventDescriptor()
        let injection = ErrnoInjection(.init("write", errno: EINTR, onAttempts: 1...3))
        let written = try injection.during { try add(5, to: fd) }
        XCTAssertEqual(written, 8)
        XCTAssertEqual(injection.calls, ["write", "write", "write", "write"], "three interrupted attempts, then the call")
        XCTAssertEqual(try readCounter(fd), 5, "written once: the interrupted attempts wrote nothing")
    }

    func testAWouldBlockIsThrownAsAgainOnceAndNeverRetried() throws {
        let fd = try eventDescriptor()
        _ = try add(7, to: fd)
        XCTAssertEqual(EWOULDBLOCK, EAGAIN, "one code on Linux: `again` stands for both")
        let injection = ErrnoInjection(.init("read", errno: EWOULDBLOCK))
        XCTAssertThrowsError(try injection.during { try readCounter(fd) }) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: .again, call: "read"))
        }
        XCTAssertEqual(injection.calls, ["read"])
        XCTAssertEqual(try readCounter(fd), 7, "the refused attempt read nothing")
    }

    func testRunningOutOfDescriptorsThrowsATypedErrorNamingTheCallAndItsPath() throws {
        let path = try scratchDirectory() + "/file"
        let perProcess = ErrnoInjection(.init("open", errno: EMFILE))
        XCTAssertThrowsError(try perProcess.during { try Kernel.open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode: 0o600) }) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: .tooManyOpenFiles, call: "open(\(path))"))
        }
        let systemWide = ErrnoInjection(.init("eventfd", errno: ENFILE))
        XCTAssertThrowsError(try systemWide.during { try Kernel.eventDescriptor() }) { error in
            XCTAssertEqual((error as? SystemCallError)?.code, .tooManyOpenFilesInSystem)
            XCTAssertEqual((error as? SystemCallError)?.description, "eventfd failed: Too many open files in system (errno 23)")
        }
        XCTAssertEqual(perProcess.calls.count + systemWide.calls.count, 2, "neither retried")
        XCTAssertFalse(Kernel.exists(path), "the refused open created nothing")
    }

    func testOnlyTheChosenAttemptOfTheNamedCallFails() throws {
        let directory = try scratchDirectory()
        let injection = ErrnoInjection(.init("open", errno: EMFILE, onAttempts: 2...2))
        let first = try injection.during { try Kernel.open("\(directory)/a", O_RDWR | O_CREAT | O_CLOEXEC, mode: 0o600) }
        defer { Kernel.close(first) }
        XCTAssertThrowsError(try injection.during { try Kernel.open("\(directory)/b", O_RDWR | O_CREAT | O_CLOEXEC, mode: 0o600) }) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: .tooManyOpenFiles, call: "open(\(directory)/b)"))
        }
        let third = try injection.during { try Kernel.open("\(directory)/c", O_RDWR | O_CREAT | O_CLOEXEC, mode: 0o600) }
        defer { Kernel.close(third) }
        XCTAssertEqual(injection.calls, ["open(\(directory)/a)", "open(\(directory)/b)", "open(\(directory)/c)"])

        let second = ErrnoInjection(.init("pwrite", errno: EIO))
        XCTAssertThrowsError(try second.during { try Kernel.overwrite(first, with: [1, 2, 3]) }) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: Code(rawValue: EIO), call: "pwrite"))
        }
        XCTAssertEqual(second.calls, ["ftruncate", "pwrite"], "the call before it was made, and nothing after it")
    }

    func testAnInjectionAppliesToItsOwnThreadOnly() throws {
        let fd = try eventDescriptor()
        let injection = ErrnoInjection(.init("write", errno: EIO, onAttempts: 1...Int.max))
        let otherThreadWrote = DispatchSemaphore(value: 0)
        let otherWritten = LockedValue<Int?>(nil)
        injection.during {
            let thread = Thread {
                let written = try? withUnsafeBytes(of: UInt64(1)) { try Kernel.write(fd, $0) }
                otherWritten.withLock { $0 = written }
                otherThreadWrote.signal()
            }
            thread.start()
            XCTAssertEqual(otherThreadWrote.wait(timeout: .now() + 10), .success)
        }
        XCTAssertEqual(otherWritten.withLock { $0 }, 8, "the other thread's write was made")
        XCTAssertEqual(injection.calls, [], "the other thread's write did not pass through it")
    }

    func testMakingADirectoryAnsweredWithEEXISTReturnsFalseAndOtherErrorsThrow() throws {
        let directory = try scratchDirectory()
        XCTAssertFalse(try ErrnoInjection(.init("mkdir", errno: EEXIST)).during { try Kernel.makeDirectory("\(directory)/new", 0o700) })
        XCTAssertThrowsError(try ErrnoInjection(.init("mkdir", errno: EACCES)).during { try Kernel.makeDirectory("\(directory)/new", 0o700) }) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: .permissionDenied, call: "mkdir(\(directory)/new)"))
        }
        XCTAssertFalse(Kernel.exists("\(directory)/new"))
    }

    func testALockRefusedWithEAGAINOrEACCESReadsAsHeldByAnotherAndOtherErrorsThrow() throws {
        let path = try scratchDirectory() + "/lock"
        let fd = try Kernel.open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode: 0o600)
        defer { Kernel.close(fd) }
        for code in [EAGAIN, EACCES] {
            XCTAssertFalse(try ErrnoInjection(.init("fcntl(F_OFD_SETLK)", errno: code)).during { try Kernel.lockExclusively(fd) })
        }
        XCTAssertThrowsError(try ErrnoInjection(.init("fcntl", errno: ENOLCK)).during { try Kernel.lockExclusively(fd) }) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: Code(rawValue: ENOLCK), call: "fcntl(F_OFD_SETLK)"))
        }
        XCTAssertFalse(try Kernel.isLockedByAnother(fd), "no attempt took the lock")
    }

    func testADirectorySyncRefusedWithEINVALIsDoneAndAnIOErrorIsThrown() throws {
        let directory = try scratchDirectory()
        let refused = ErrnoInjection(.init("fsync", errno: EINVAL))
        try refused.during { try Kernel.synchronizeDirectory(directory) }
        XCTAssertEqual(refused.calls, ["open(\(directory))", "fsync"])
        XCTAssertThrowsError(try ErrnoInjection(.init("fsync", errno: EIO)).during { try Kernel.synchronizeDirectory(directory) }) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: Code(rawValue: EIO), call: "fsync"))
        }
    }

    func testAnExistenceCheckInterruptedTwiceStillFindsTheFile() throws {
        let directory = try scratchDirectory()
        let injection = ErrnoInjection(.init("access", errno: EINTR, onAttempts: 1...2))
        XCTAssertTrue(injection.during { Kernel.exists(directory) })
        XCTAssertEqual(injection.calls.count, 3)
    }

    private typealias Code = SystemCallError.Code
}
#endif
