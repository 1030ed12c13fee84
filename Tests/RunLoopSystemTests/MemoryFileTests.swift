import Glibc
@testable import RunLoopSystem
import XCTest

/// Memory files through the `Kernel` funnel: made close-on-exec and sealable, sized,
/// sealed (and then refusing what the seals forbid, with the named error), mapped shared;
/// none of their descriptors or mappings left behind.
final class MemoryFileTests: XCTestCase {
    private func openDescriptors() throws -> Int {
        try Kernel.directoryEntries("/proc/self/fd").count
    }

    /// The mappings of memory files named `name` that this process has (`/proc/self/maps`).
    private func mappings(named name: String) throws -> Int {
        let fd = try Kernel.open("/proc/self/maps", O_RDONLY | O_CLOEXEC)
        defer { Kernel.close(fd) }
        var maps: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while case let read = try chunk.withUnsafeMutableBytes({ try Kernel.read(fd, into: $0) }), read > 0 {
            maps += chunk.prefix(read)
        }
        return String(decoding: maps, as: UTF8.self).split(separator: "\n")
            .filter { $0.hasSuffix("/memfd:\(name) (deleted)") }.count
    }

    private func write(_ text: String, to fd: Int32) throws {
        try Kernel.writeAll(fd, Array(text.utf8))
    }

    private func contents(of fd: Int32, count: Int) throws -> String {
        var bytes = [UInt8](repeating: 0, count: count)
        let read = try bytes.withUnsafeMutableBytes { try Kernel.pread(fd, into: $0, at: 0) }
        return String(decoding: bytes.prefix(read), as: UTF8.self)
    }

    func testAMemoryFileIsMadeCloseOnExecEmptyAndWithoutSeals() throws {
        let fd = try Kernel.memoryFile(named: "runloopsystem-tests")
        defer { Kernel.close(fd) }
        XCTAssertEqual(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC)
        XCTAssertEqual(try Kernel.status(fd).st_size, 0)
        XCTAssertEqual(try Kernel.seals(of: fd), [], "sealable, and no seal yet")
        try Kernel.setSize(fd, to: 12_345)
        XCTAssertEqual(try Kernel.status(fd).st_size, 12_345)
    }

    func testASealedMemoryFileRefusesAWriteAndAGrowWithOperationNotPermitted() throws {
        let fd = try Kernel.memoryFile(named: "runloopsystem-tests")
        defer { Kernel.close(fd) }
        try write("sealed bytes", to: fd)
        try Kernel.addSeals(.immutable, to: fd)
        XCTAssertEqual(try Kernel.seals(of: fd), [.write, .shrink, .grow, .seal])

        let refused = SystemCallError.Code.operationNotPermitted
        XCTAssertThrowsError(try write("changed", to: fd)) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: refused, call: "write"))
        }
        XCTAssertThrowsError(try Kernel.setSize(fd, to: 1 << 20)) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: refused, call: "ftruncate"), "a grow")
        }
        XCTAssertThrowsError(try Kernel.setSize(fd, to: 4)) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: refused, call: "ftruncate"), "a shrink")
        }
        XCTAssertThrowsError(try Kernel.mapForReadingAndWriting(fd, count: 12)) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: refused, call: "mmap"), "a writable mapping")
        }
        XCTAssertThrowsError(try Kernel.addSeals(.futureWrite, to: fd)) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: refused, call: "fcntl(F_ADD_SEALS)"), "a seal after .seal")
        }
        XCTAssertEqual(try contents(of: fd, count: 64), "sealed bytes", "nothing refused changed the file")
        XCTAssertEqual(try Kernel.status(fd).st_size, 12)
    }

    func testAMappingReadsWhatWasWrittenAndWhatAWritableMappingWritesIsTheFiles() throws {
        let fd = try Kernel.memoryFile(named: "runloopsystem-tests")
        defer { Kernel.close(fd) }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        try Kernel.setSize(fd, to: 2 * page)
        let pattern = (0..<(2 * page)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        _ = try pattern.withUnsafeBytes { try Kernel.write(fd, $0) }

        let read = try Kernel.withMappingForReading(fd, count: 2 * page) { Array($0) }
        XCTAssertEqual(read, pattern)

        let writable = try Kernel.mapForReadingAndWriting(fd, count: 2 * page)
        writable.copyBytes(from: "through the mapping".utf8)
        XCTAssertEqual(try contents(of: fd, count: 19), "through the mapping", "the mapping's bytes are the file's")
        XCTAssertThrowsError(try Kernel.addSeals(.write, to: fd)) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: .busy, call: "fcntl(F_ADD_SEALS)"),
                           "no write seal while a writable mapping could still write")
        }
        try Kernel.addSeals(.futureWrite, to: fd)
        writable[page] = 0xAB
        XCTAssertEqual(try Kernel.withMappingForReading(fd, count: 2 * page) { $0[page] }, 0xAB,
                       "a mapping made before the future-write seal still writes")
        XCTAssertThrowsError(try write("x", to: fd)) { error in
            XCTAssertEqual((error as? SystemCallError)?.code, .operationNotPermitted, "a write after it does not")
        }
        try Kernel.unmap(UnsafeRawBufferPointer(writable))
        try Kernel.addSeals(.write, to: fd)
        XCTAssertEqual(try Kernel.seals(of: fd), [.futureWrite, .write])
    }

    func testAFileOnDiskHasNoSealsToReadAndAClosedDescriptorNone() throws {
        let fd = try Kernel.open("/proc/self/stat", O_RDONLY | O_CLOEXEC)
        XCTAssertThrowsError(try Kernel.seals(of: fd)) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: .invalidArgument, call: "fcntl(F_GET_SEALS)"))
        }
        Kernel.close(fd)
        XCTAssertThrowsError(try Kernel.seals(of: fd)) { error in
            XCTAssertEqual((error as? SystemCallError)?.code, .badDescriptor)
        }
    }

    func testFiveHundredMemoryFilesMadeSealedMappedAndClosedLeaveNoDescriptorOrMappingBehind() throws {
        let name = "runloopsystem-tests-\(getpid())"
        let before = try openDescriptors()
        let first = try Kernel.memoryFile(named: name)
        try Kernel.setSize(first, to: 4096)
        let mapping = try Kernel.mapForReading(first, count: 4096)
        Kernel.close(first)
        XCTAssertEqual(try mappings(named: name), 1, "a mapping outlives its descriptor, and is seen")
        try Kernel.unmap(mapping)
        for round in 0..<500 {
            let fd = try Kernel.memoryFile(named: name)
            try write("round \(round)", to: fd)
            try Kernel.addSeals(.immutable, to: fd)
            let text = try Kernel.withMappingForReading(fd, count: Int(try Kernel.status(fd).st_size)) {
                String(decoding: $0, as: UTF8.self)
            }
            XCTAssertEqual(text, "round \(round)")
            Kernel.close(fd)
        }
        XCTAssertEqual(try openDescriptors(), before, "every memory file's descriptor was closed")
        XCTAssertEqual(try mappings(named: name), 0, "every mapping was unmapped")
    }

    #if ERRNO_INJECTION
    func testAnInjectedErrnoOnEachMemoryFileCallIsThrownTypedNamingTheCall() throws {
        let before = try openDescriptors()
        let noDescriptor = ErrnoInjection(.init("memfd_create", errno: EMFILE))
        XCTAssertThrowsError(try noDescriptor.during { try Kernel.memoryFile(named: "refused") }) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: .tooManyOpenFiles, call: "memfd_create(refused)"))
        }
        XCTAssertEqual(noDescriptor.calls, ["memfd_create(refused)"], "not retried")
        XCTAssertEqual(try openDescriptors(), before, "the refused call made no descriptor")

        let fd = try Kernel.memoryFile(named: "runloopsystem-tests")
        defer { Kernel.close(fd) }
        let faults: [(call: String, errno: Int32, code: SystemCallError.Code, body: () throws(SystemCallError) -> Void)] = [
            ("ftruncate", ENOMEM, .outOfMemory, { () throws(SystemCallError) in try Kernel.setSize(fd, to: 4096) }),
            ("fcntl(F_ADD_SEALS)", EBUSY, .busy, { () throws(SystemCallError) in try Kernel.addSeals(.grow, to: fd) }),
            ("fcntl(F_GET_SEALS)", EINVAL, .invalidArgument, { () throws(SystemCallError) in _ = try Kernel.seals(of: fd) }),
            ("mmap", ENOMEM, .outOfMemory, { () throws(SystemCallError) in _ = try Kernel.mapForReading(fd, count: 4096) }),
        ]
        for fault in faults {
            let injection = ErrnoInjection(.init(fault.call, errno: fault.errno))
            XCTAssertThrowsError(try injection.during(fault.body)) { error in
                XCTAssertEqual(error as? SystemCallError, SystemCallError(code: fault.code, call: fault.call))
            }
            XCTAssertEqual(injection.calls, [fault.call], "not retried")
        }
        XCTAssertEqual(try Kernel.status(fd).st_size, 0, "the refused ftruncate sized nothing")
        XCTAssertEqual(try Kernel.seals(of: fd), [], "the refused seal sealed nothing")

        try Kernel.setSize(fd, to: 4096)
        let mapping = try Kernel.mapForReading(fd, count: 4096)
        let unmapping = ErrnoInjection(.init("munmap", errno: EINVAL))
        XCTAssertThrowsError(try unmapping.during { try Kernel.unmap(mapping) }) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: .invalidArgument, call: "munmap"))
        }
        try Kernel.unmap(mapping)
    }

    func testInterruptedMemoryFileCallsAreRetriedUntilTheyAreMade() throws {
        let injection = ErrnoInjection(
            .init("memfd_create", errno: EINTR, onAttempts: 1...2), .init("ftruncate", errno: EINTR),
            .init("fcntl(F_ADD_SEALS)", errno: EINTR), .init("mmap", errno: EINTR), .init("munmap", errno: EINTR))
        let fd = try injection.during { () throws(SystemCallError) -> Int32 in
            let fd = try Kernel.memoryFile(named: "interrupted")
            try Kernel.setSize(fd, to: 4096)
            try Kernel.addSeals(.grow, to: fd)
            let mapping = try Kernel.mapForReading(fd, count: 4096)
            try Kernel.unmap(mapping)
            return fd
        }
        defer { Kernel.close(fd) }
        XCTAssertEqual(injection.calls, [
            "memfd_create(interrupted)", "memfd_create(interrupted)", "memfd_create(interrupted)",
            "ftruncate", "ftruncate", "fcntl(F_ADD_SEALS)", "fcntl(F_ADD_SEALS)", "mmap", "mmap", "munmap", "munmap",
        ])
        XCTAssertEqual(try Kernel.status(fd).st_size, 4096)
        XCTAssertEqual(try Kernel.seals(of: fd), [.grow])
    }
    #endif
}
