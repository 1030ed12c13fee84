import Glibc

/// The seals on a memory file (`fcntl(2)`'s `F_SEAL_*`, from `<linux/fcntl.h>`, which
/// Glibc's Swift module does not export): each forbids one kind of change to the file, for
/// every descriptor and mapping of it, the sealer's own included, and none can be removed.
package struct MemoryFileSeals: OptionSet, Sendable, Hashable {
    package let rawValue: Int32

    package init(rawValue: Int32) { self.rawValue = rawValue }

    /// `F_SEAL_SEAL`: no further seal can be added.
    package static let seal = MemoryFileSeals(rawValue: 0x1)
    /// `F_SEAL_SHRINK`: the file cannot be made smaller.
    package static let shrink = MemoryFileSeals(rawValue: 0x2)
    /// `F_SEAL_GROW`: the file cannot be made larger, by a size or a write past its end.
    package static let grow = MemoryFileSeals(rawValue: 0x4)
    /// `F_SEAL_WRITE`: the contents cannot be written, through a descriptor or a shared
    /// writable mapping. Refused with `busy` while such a mapping exists.
    package static let write = MemoryFileSeals(rawValue: 0x8)
    /// `F_SEAL_FUTURE_WRITE` (Linux 5.1): no new write or shared writable mapping, while
    /// the writable mappings made before it stay writable (the sealer's own ring, say).
    package static let futureWrite = MemoryFileSeals(rawValue: 0x10)

    /// The seals that fix a file's contents and size for good: no write, no shrink, no
    /// growth, no further seal. A receiver that finds them may read the file where it lies.
    package static let immutable: MemoryFileSeals = [.write, .shrink, .grow, .seal]
}

/// Memory files (`memfd_create(2)`: a file with no name in any directory, in memory, that
/// a descriptor passed to another process shares), their seals and shared mappings of
/// them, each call through `systemCall`.
extension Kernel {
    /// `memfd_create(2)` with `name` (seen only as `memfd:name` in `/proc`: it is no path),
    /// close-on-exec and sealable (`MFD_CLOEXEC | MFD_ALLOW_SEALING`), of size 0; returns
    /// the new descriptor. `notImplemented` where the C library has no `memfd_create`.
    package static func memoryFile(named name: String) throws(SystemCallError) -> Int32 {
        try systemCall("memfd_create(\(name))") {
            guard let create = memfdCreate else {
                Glibc.errno = ENOSYS
                return -1
            }
            return create(name, 0x1 | 0x2) // MFD_CLOEXEC | MFD_ALLOW_SEALING, <linux/memfd.h>
        }
    }

    /// `ftruncate(2)`: the file is `count` bytes long, zeros past what it held.
    package static func setSize(_ fd: Int32, to count: Int) throws(SystemCallError) {
        try systemCall("ftruncate") { Glibc.ftruncate(fd, off_t(count)) }
    }

    /// `fcntl(2)`, `F_ADD_SEALS`: adds `seals` to the memory file's. `operationNotPermitted`
    /// if it is sealed with `.seal` (or is not sealable), `busy` for `.write` while a shared
    /// writable mapping of it exists.
    package static func addSeals(_ seals: MemoryFileSeals, to fd: Int32) throws(SystemCallError) {
        try systemCall("fcntl(F_ADD_SEALS)") { fcntl(fd, addSealsCommand, seals.rawValue) }
    }

    /// `fcntl(2)`, `F_GET_SEALS`: the file's seals (`invalidArgument` for a file that
    /// cannot have any, such as a pipe or a file on disk).
    package static func seals(of fd: Int32) throws(SystemCallError) -> MemoryFileSeals {
        MemoryFileSeals(rawValue: try systemCall("fcntl(F_GET_SEALS)") { fcntl(fd, getSealsCommand) })
    }

    /// `mmap(2)` of the file's first `count` bytes, shared and read-only. The caller
    /// unmaps it (`unmap`); it stays valid after `fd` is closed.
    package static func mapForReading(_ fd: Int32, count: Int) throws(SystemCallError) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(try mapShared(fd, count: count, protection: PROT_READ))
    }

    /// `mmap(2)` of the file's first `count` bytes, shared and readable and writable: what
    /// is written there is the file's, seen by every other mapping of it. The caller
    /// unmaps it (`unmap`); it stays valid after `fd` is closed.
    package static func mapForReadingAndWriting(_ fd: Int32, count: Int) throws(SystemCallError) -> UnsafeMutableRawBufferPointer {
        try mapShared(fd, count: count, protection: PROT_READ | PROT_WRITE)
    }

    /// `munmap(2)` of a mapping `mapForReading` or `mapForReadingAndWriting` returned.
    package static func unmap(_ mapping: UnsafeRawBufferPointer) throws(SystemCallError) {
        try systemCall("munmap") { munmap(UnsafeMutableRawPointer(mutating: mapping.baseAddress), mapping.count) }
    }

    /// Calls `body` with the file's first `count` bytes mapped shared and read-only, and
    /// unmaps them after.
    package static func withMappingForReading<Result>(
        _ fd: Int32, count: Int, _ body: (UnsafeRawBufferPointer) -> Result
    ) throws(SystemCallError) -> Result {
        let mapping = try mapForReading(fd, count: count)
        defer { try? unmap(mapping) }
        return body(mapping)
    }

    private static func mapShared(_ fd: Int32, count: Int, protection: Int32) throws(SystemCallError) -> UnsafeMutableRawBufferPointer {
        // MAP_FAILED is (void *)-1, so the funnel sees mmap's failure as any call's -1.
        let address = try systemCall("mmap") { Int(bitPattern: mmap(nil, count, protection, MAP_SHARED, fd, 0)) }
        return UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(bitPattern: address), count: count)
    }

    /// `fcntl(2)`'s seal commands, from `<linux/fcntl.h>`: `F_LINUX_SPECIFIC_BASE` (1024) + 9 and + 10.
    private static let addSealsCommand: Int32 = 1024 + 9
    private static let getSealsCommand: Int32 = 1024 + 10
}

/// `memfd_create(3)`, looked up once in the C library: Glibc's Swift module does not export
/// it (it is `_GNU_SOURCE`). Nil where the C library has none (glibc before 2.27).
private let memfdCreate: (@convention(c) (UnsafePointer<CChar>, UInt32) -> Int32)? = {
    guard let symbol = dlsym(nil, "memfd_create") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafePointer<CChar>, UInt32) -> Int32).self)
}()
