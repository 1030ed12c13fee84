import Glibc
import RunLoopKit

// The kernel calls this example makes beyond RunLoopKit's `Kernel` (which has no memfd,
// seal or mapping call yet: shared memory for large data components is not built), each
// through RunLoopKit's funnel, `systemCall` (errno read at the failure point, EINTR retried,
// a typed `SystemCallError`). `systemCall` and `Kernel` are the package's own API: an
// example may use them, an application outside the package makes these calls itself.

/// `memfd_create(2)`, looked up in the C library: Glibc's module for Swift does not export
/// it (it is `_GNU_SOURCE`), and this example adds no C target of its own.
private let memfdCreate: @convention(c) (UnsafePointer<CChar>, UInt32) -> Int32 = {
    guard let symbol = dlsym(nil, "memfd_create") else { fatalError("this C library has no memfd_create") }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafePointer<CChar>, UInt32) -> Int32).self)
}()
/// `MFD_CLOEXEC | MFD_ALLOW_SEALING`, from `<linux/memfd.h>`.
private let memfdFlags: UInt32 = 0x1 | 0x2

/// `fcntl(2)`'s seal commands and seals, from `<linux/fcntl.h>` (Glibc's module for Swift
/// does not export them): `F_LINUX_SPECIFIC_BASE` (1024) + 9 and + 10.
let addSealsCommand: Int32 = 1024 + 9, getSealsCommand: Int32 = 1024 + 10
let sealSeal: Int32 = 0x1, sealShrink: Int32 = 0x2, sealGrow: Int32 = 0x4, sealWrite: Int32 = 0x8

/// The seals that make a memfd's contents fixed: no write, no shrink, no growth, no new seal.
let imageSeals: Int32 = sealWrite | sealShrink | sealGrow | sealSeal

/// A memfd (close-on-exec, sealable) holding `bytes`, sealed with `imageSeals`: the
/// receiver can map it and know that no one, its sender included, can change it under it.
func sealedMemoryFile(named name: String, holding bytes: [UInt8]) throws(SystemCallError) -> Int32 {
    let fd = try systemCall("memfd_create") { memfdCreate(name, memfdFlags) }
    do throws(SystemCallError) {
        try Kernel.writeAll(fd, bytes)
        try systemCall("fcntl(F_ADD_SEALS)") { fcntl(fd, addSealsCommand, imageSeals) }
    } catch {
        Kernel.close(fd)
        throw error
    }
    return fd
}

/// The seals on `fd` (`F_GET_SEALS`).
func seals(of fd: Int32) throws(SystemCallError) -> Int32 {
    try systemCall("fcntl(F_GET_SEALS)") { fcntl(fd, getSealsCommand) }
}

/// Calls `body` with `fd`'s `count` bytes mapped read-only (`mmap(2)`, `MAP_SHARED`), and
/// unmaps them after (`munmap(2)`).
func withReadOnlyMapping<Result>(of fd: Int32, count: Int,
                                 _ body: (UnsafeRawBufferPointer) -> Result) throws(SystemCallError) -> Result {
    // MAP_FAILED is (void *)-1, so the funnel sees mmap's failure as any call's -1.
    let address = try systemCall("mmap") { Int(bitPattern: mmap(nil, count, PROT_READ, MAP_SHARED, fd, 0)) }
    defer { _ = try? systemCall("munmap") { munmap(UnsafeMutableRawPointer(bitPattern: address), count) } }
    return body(UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: address), count: count))
}

/// An unnamed temporary file in `/tmp` holding `bytes`: made by `mkstemp(3)` and unlinked
/// at once, so nothing is left behind however the program ends. Returns its descriptor.
func temporaryFile(holding bytes: [UInt8]) throws(SystemCallError) -> Int32 {
    var template = Array("/tmp/runloopkit-image-handoff-XXXXXX".utf8CString)
    let fd = try systemCall("mkstemp") { template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) } }
    let path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    do throws(SystemCallError) {
        try Kernel.unlink(path)
        try systemCall("fcntl(F_SETFD)") { fcntl(fd, F_SETFD, FD_CLOEXEC) }
        try Kernel.writeAll(fd, bytes)
    } catch {
        Kernel.close(fd)
        throw error
    }
    return fd
}

/// Reads `count` bytes of `fd` from offset 0 (`pread(2)`: the offset the sender shares
/// with this descriptor stays where it is).
func readAll(_ fd: Int32, count: Int) throws(SystemCallError) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    var done = 0
    while done < count {
        let start = done
        let read = try bytes.withUnsafeMutableBufferPointer { buffer throws(SystemCallError) in
            try Kernel.pread(fd, into: UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[start...]),
                             at: start)
        }
        guard read > 0 else { throw SystemCallError(call: "pread (end of file at \(done) of \(count) bytes)", errno: EIO) }
        done += read
    }
    return bytes
}

/// How many descriptors this process has open: the entries of `/proc/self/fd` (the one
/// `opendir` holds while it reads them included, each time alike).
func openDescriptorCount() throws(SystemCallError) -> Int {
    try Kernel.directoryEntries("/proc/self/fd").filter { $0 != "." && $0 != ".." }.count
}

/// A 64-bit FNV-1a-style checksum over 8-byte words (and the tail byte by byte): every byte
/// is read, which is what the receiver must do for a transfer to count.
func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
    let prime: UInt64 = 0x0000_0100_0000_01B3
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    let words = bytes.count / 8
    var offset = 0
    while offset < words * 8 {
        hash = (hash ^ bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* prime
        offset += 8
    }
    while offset < bytes.count {
        hash = (hash ^ UInt64(bytes[offset])) &* prime
        offset += 1
    }
    return hash
}

/// An image's bytes: `count` bytes of a pattern no two rounds of which are alike.
func makeImage(count: Int) -> [UInt8] {
    var image = [UInt8](repeating: 0, count: count)
    image.withUnsafeMutableBytes { buffer in
        var offset = 0
        var value: UInt64 = 0x9E37_79B9_7F4A_7C15
        while offset + 8 <= buffer.count {
            buffer.storeBytes(of: value, toByteOffset: offset, as: UInt64.self)
            value = value &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            offset += 8
        }
    }
    return image
}
