import Glibc
import RunLoopKit
import Synchronization

/// The `floor-shm` peer of `port-throughput-processes`: a ring of slots in a memfd that
/// two processes map, one writing each message in place into the next free slot and the
/// other reading it where it lies, with no framing and no copy besides the two the case
/// asks for (the sender's writes, the receiver's reads): the limit of a shared-memory
/// design, memory bandwidth. Its descriptors (the memfd and two eventfds) go to the other
/// process with `SCM_RIGHTS`.
///
/// The first page holds five 64-bit counters, a cache line each: `head` (messages
/// published; the sender's), `tail` (messages read and their slots freed; the receiver's),
/// the receiver's "asleep" flag, the sender's "wake me when `tail` reaches this" (0: awake)
/// and `closed`. Slot `i % slotCount` lies at `page + i × stride`. Neither side spins: a
/// side that finds nothing to do says so, looks once more, and blocks in `read(2)` on its
/// eventfd; the other side, after moving its counter (sequentially consistent, so the
/// load of what the sleeper said cannot pass it), writes that eventfd only if it must, so
/// a stream that never waits makes no system call at all. A sender that found the ring
/// full sleeps until half of it is free, not one slot (else a receiver slower than the
/// sender would wake it for every message).
final class SharedMemoryRing: @unchecked Sendable {
    static let headerBytes = 4096
    private static let head = 0, tail = 1, receiverAsleep = 2, senderWakeAt = 3, closed = 4

    let slotCount: Int
    let stride: Int
    let payload: Int
    let memory: Int32
    /// Written by the sender when it publishes, read by the receiver (blocking).
    let ready: Int32
    /// Written by the receiver when it frees a slot, read by the sender (blocking).
    let freed: Int32
    /// The shared mapping of the whole memfd, header and slots, and where it starts.
    private let mapping: UnsafeMutableRawBufferPointer
    private let base: UnsafeMutableRawPointer
    /// The side's own counter, kept locally too (only that side writes it).
    private var position: UInt64 = 0

    /// The layout for messages of `payload` bytes: slots rounded up to a cache line, as
    /// many as fill 16 MiB, at least 8 and at most 65,536. (A ring of 1 MiB made the floor
    /// stall at 64 KiB on a loaded machine: its 16 slots held 0.1 ms of the sender's work,
    /// less than a wake-up of the receiver can take there.)
    static func layout(payload: Int) -> (slotCount: Int, stride: Int) {
        let stride = (payload + 63) / 64 * 64
        return (min(65_536, max(8, (16 << 20) / stride)), stride)
    }

    /// The sender's side: a new memfd and two eventfds (each call through RunLoopKit's
    /// funnel, `Kernel`; a bench has no use for a failure but to stop).
    init(payload: Int) {
        self.payload = payload
        (slotCount, stride) = Self.layout(payload: payload)
        let mappedBytes = Self.headerBytes + slotCount * stride
        do {
            memory = try Kernel.memoryFile(named: "runloopkit-bench.floor-shm")
            try Kernel.setSize(memory, to: mappedBytes)
            ready = try Kernel.eventDescriptor()
            freed = try Kernel.eventDescriptor()
            mapping = try Kernel.mapForReadingAndWriting(memory, count: mappedBytes)
        } catch {
            fatalError("floor-shm: \(error)")
        }
        base = mapping.baseAddress!
        for index in 0..<5 { counter(index).initialize(to: Atomic<UInt64>(0)) }
    }

    /// The receiver's side, from descriptors received with the layout the sender sent;
    /// nil if the layout does not fit the memfd (a receiver maps only what it checked).
    init?(memory: Int32, ready: Int32, freed: Int32, slotCount: Int, stride: Int, payload: Int) {
        guard slotCount >= 1, slotCount <= 65_536, payload >= 8, payload <= stride, stride <= 1 << 26,
              let status = try? Kernel.status(memory), status.st_size >= off_t(Self.headerBytes + slotCount * stride)
        else { return nil }
        (self.memory, self.ready, self.freed) = (memory, ready, freed)
        (self.slotCount, self.stride, self.payload) = (slotCount, stride, payload)
        do {
            mapping = try Kernel.mapForReadingAndWriting(memory, count: Self.headerBytes + slotCount * stride)
        } catch {
            fatalError("floor-shm: \(error)")
        }
        base = mapping.baseAddress!
    }

    deinit {
        try? Kernel.unmap(UnsafeRawBufferPointer(mapping))
        Kernel.close(memory)
        Kernel.close(ready)
        Kernel.close(freed)
    }

    private func counter(_ index: Int) -> UnsafeMutablePointer<Atomic<UInt64>> {
        (base + index * 64).assumingMemoryBound(to: Atomic<UInt64>.self)
    }

    private func slot(_ sequence: UInt64) -> UnsafeMutableRawPointer {
        base + Self.headerBytes + Int(sequence % UInt64(slotCount)) * stride
    }

    // MARK: Sender

    /// Waits for a free slot, lets `fill` write the next message in place, publishes it.
    @inline(__always)
    func send(_ fill: (UnsafeMutableRawPointer) -> Void) {
        let slots = UInt64(slotCount)
        while position &- counter(Self.tail).pointee.load(ordering: .acquiring) >= slots {
            let halfFree = position &- slots &+ (slots + 1) / 2 // the tail at which half is free
            sleep(flag: Self.senderWakeAt, value: halfFree, on: freed) { [self] in
                counter(Self.tail).pointee.load(ordering: .sequentiallyConsistent) >= halfFree
            }
        }
        fill(slot(position))
        position &+= 1
        counter(Self.head).pointee.store(position, ordering: .sequentiallyConsistent)
        wake(flag: Self.receiverAsleep, through: ready)
    }

    /// Tells the receiver the ring is done; it unmaps and closes its side.
    func close() {
        counter(Self.closed).pointee.store(1, ordering: .sequentiallyConsistent)
        var one: UInt64 = 1
        _ = write(ready, &one, 8)
    }

    // MARK: Receiver

    /// Waits for the next message and lends its bytes to `read`, then frees its slot;
    /// returns false once the sender closed the ring and every message was read.
    @inline(__always)
    func receive(_ read: (UnsafeRawBufferPointer) -> Void) -> Bool {
        while counter(Self.head).pointee.load(ordering: .acquiring) == position {
            if counter(Self.closed).pointee.load(ordering: .acquiring) != 0 { return false }
            sleep(flag: Self.receiverAsleep, value: 1, on: ready) { [self] in
                counter(Self.head).pointee.load(ordering: .sequentiallyConsistent) != position
                    || counter(Self.closed).pointee.load(ordering: .sequentiallyConsistent) != 0
            }
        }
        read(UnsafeRawBufferPointer(start: slot(position), count: payload))
        position &+= 1
        counter(Self.tail).pointee.store(position, ordering: .sequentiallyConsistent)
        let wakeAt = counter(Self.senderWakeAt).pointee.load(ordering: .sequentiallyConsistent)
        if wakeAt != 0 && position >= wakeAt { wake(flag: Self.senderWakeAt, through: freed) }
        return true
    }

    // MARK: Waiting

    /// Announces the sleep in `flag` (`value`, not 0), looks once more (`isReady`), and
    /// blocks on `descriptor` unless it is ready. A stale count left in the eventfd only
    /// makes one extra turn.
    private func sleep(flag: Int, value: UInt64, on descriptor: Int32, unless isReady: () -> Bool) {
        counter(flag).pointee.store(value, ordering: .sequentiallyConsistent)
        if !isReady() {
            var count: UInt64 = 0
            while Glibc.read(descriptor, &count, 8) < 0 && errno == EINTR {}
        }
        counter(flag).pointee.store(0, ordering: .relaxed)
    }

    @inline(__always)
    private func wake(flag: Int, through descriptor: Int32) {
        guard counter(flag).pointee.load(ordering: .sequentiallyConsistent) != 0,
              counter(flag).pointee.exchange(0, ordering: .sequentiallyConsistent) != 0 else { return }
        var one: UInt64 = 1
        _ = write(descriptor, &one, 8)
    }
}

/// The Unix datagram socket over which the shared-memory peer passes its descriptors
/// (`SCM_RIGHTS`, blocking): the part of the peer not made through RunLoopKit's `Kernel`,
/// whose descriptor passing is connected, non-blocking `SOCK_SEQPACKET`. The memfd, its
/// mapping and the eventfds are made through `Kernel`.
enum Kernelish {
    /// A Unix datagram socket, bound to `path` when given.
    static func datagramSocket(boundTo path: String? = nil) -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { fatalError("socket: errno \(errno)") }
        if let path {
            let rc = withAddress(path) { bind(descriptor, $0, $1) }
            guard rc == 0 else { fatalError("bind \(path): errno \(errno)") }
        }
        return descriptor
    }

    private static func withAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        precondition(bytes.count < MemoryLayout.size(ofValue: address.sun_path), "socket path too long: \(path)")
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// `sendmsg` of `words` with `descriptors` (`SCM_RIGHTS`) to the socket bound at `path`.
    static func send(_ words: [UInt64], descriptors: [Int32], on socket: Int32, to path: String) {
        var words = words
        let control = UnsafeMutableRawBufferPointer.allocate(byteCount: controlBytes(descriptors.count), alignment: 8)
        defer { control.deallocate() }
        control.initializeMemory(as: UInt8.self, repeating: 0)
        // struct cmsghdr { size_t cmsg_len; int cmsg_level; int cmsg_type; } then the data.
        control.storeBytes(of: 16 + 4 * descriptors.count, toByteOffset: 0, as: Int.self)
        control.storeBytes(of: SOL_SOCKET, toByteOffset: 8, as: Int32.self)
        control.storeBytes(of: 1, toByteOffset: 12, as: Int32.self) // SCM_RIGHTS
        for (index, descriptor) in descriptors.enumerated() {
            control.storeBytes(of: descriptor, toByteOffset: 16 + 4 * index, as: Int32.self)
        }
        let sent = words.withUnsafeMutableBytes { data in
            withAddress(path) { address, length in
                var vector = iovec(iov_base: data.baseAddress, iov_len: data.count)
                return withUnsafeMutablePointer(to: &vector) { vector in
                    var message = msghdr(msg_name: UnsafeMutableRawPointer(mutating: address), msg_namelen: length,
                                         msg_iov: vector, msg_iovlen: 1, msg_control: control.baseAddress,
                                         msg_controllen: control.count, msg_flags: 0)
                    return sendmsg(socket, &message, 0)
                }
            }
        }
        guard sent >= 0 else { fatalError("sendmsg: errno \(errno)") }
    }

    /// `recvmsg` of up to `wordCount` words and `descriptorCount` descriptors, blocking.
    static func receive(wordCount: Int, descriptorCount: Int, on socket: Int32) -> (words: [UInt64], descriptors: [Int32]) {
        var words = [UInt64](repeating: 0, count: wordCount)
        let control = UnsafeMutableRawBufferPointer.allocate(byteCount: controlBytes(descriptorCount), alignment: 8)
        defer { control.deallocate() }
        control.initializeMemory(as: UInt8.self, repeating: 0)
        var controlLength = 0
        let received = words.withUnsafeMutableBytes { data in
            var vector = iovec(iov_base: data.baseAddress, iov_len: data.count)
            return withUnsafeMutablePointer(to: &vector) { vector in
                var message = msghdr(msg_name: nil, msg_namelen: 0, msg_iov: vector, msg_iovlen: 1,
                                     msg_control: control.baseAddress, msg_controllen: control.count, msg_flags: 0)
                var count: Int
                repeat { count = recvmsg(socket, &message, Int32(MSG_CMSG_CLOEXEC)) } while count < 0 && errno == EINTR
                controlLength = message.msg_controllen
                return count
            }
        }
        guard received == wordCount * 8, controlLength >= 16 else { fatalError("recvmsg: \(received) bytes, errno \(errno)") }
        let length = control.load(fromByteOffset: 0, as: Int.self)
        let descriptors = (0..<max(0, (length - 16) / 4)).map { control.load(fromByteOffset: 16 + 4 * $0, as: Int32.self) }
        return (words, descriptors)
    }

    /// CMSG_SPACE for `count` descriptors: the header and the data, rounded to 8 bytes.
    private static func controlBytes(_ count: Int) -> Int { 16 + (4 * count + 7) / 8 * 8 }
}
