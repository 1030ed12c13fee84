import Glibc
import RunLoopKit

// The kernel calls this example makes, each through RunLoopKit's funnel (`Kernel`, over
// `systemCall`: errno read at the failure point, EINTR retried, a typed `SystemCallError`),
// memory files, seals and mappings included (`Kernel+MemoryFiles.swift`). `Kernel` is the
// package's own API: an example may use it, an application outside the package makes these
// calls itself.

/// The seals that make a memfd's contents fixed: no write, no shrink, no growth, no new seal.
let imageSeals = MemoryFileSeals.immutable

/// A memfd (close-on-exec, sealable) holding `bytes`, sealed with `imageSeals`: the
/// receiver can map it and know that no one, its sender included, can change it under it.
func sealedMemoryFile(named name: String, holding bytes: [UInt8]) throws(SystemCallError) -> Int32 {
    let fd = try Kernel.memoryFile(named: name)
    do throws(SystemCallError) {
        try Kernel.writeAll(fd, bytes)
        try Kernel.addSeals(imageSeals, to: fd)
    } catch {
        Kernel.close(fd)
        throw error
    }
    return fd
}

/// An unnamed temporary file in `/tmp` holding `bytes`: made close-on-exec under a name no
/// other file has (`O_CREAT | O_EXCL`) and unlinked at once, so nothing is left behind
/// however the program ends. Returns its descriptor.
func temporaryFile(holding bytes: [UInt8]) throws(SystemCallError) -> Int32 {
    var fd: Int32 = -1
    var path = ""
    while fd < 0 {
        path = "/tmp/runloopkit-image-handoff-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        do {
            fd = try Kernel.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode: 0o600)
        } catch where error.code == .fileExists {}
    }
    do throws(SystemCallError) {
        try Kernel.unlink(path)
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
