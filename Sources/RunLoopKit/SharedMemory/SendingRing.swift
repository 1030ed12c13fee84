import RunLoopSystem

/// The sending side of a shared ring (`SharedRingLayout`): made by a sending thread for
/// one destination port, mapped readable and writable, its descriptor given to the port
/// once (`announce`). A data component is written at the ring's head (`room`), sent as a
/// note naming where it lies, and the head moves past it (`commit`); the receiver gives
/// the bytes back through the header's `tail` once its handler is done with them.
///
/// A region is never written again before the receiver gave it back: what a receiver
/// reads where it lies cannot change under it while a well-behaved sender owns the ring.
///
/// Thread safety: none; the sending thread's, as its ZeroMQ socket is.
final class SendingRing {
    /// The token the ring is announced under, which every note names.
    let token = DescriptorToken.random()
    let capacity: Int
    /// The memory file, until the ring was announced (`descriptorAnnounced()`): the
    /// receiver's copy is its own, the mapping the sender's.
    private(set) var descriptor: Int32
    private let mapping: UnsafeMutableRawBufferPointer
    private let header: SharedRingHeader
    /// Where the next component goes: every position below it was written and sent.
    private var head: UInt64 = 0
    /// When its sender last checked the port's side channel (`SharedRingState.portCheckInterval`).
    var portCheckedAt = Deadline.now()
    /// The port's doorbell (`DescriptorPacket.doorbell`), a unix socket written without
    /// waiting, once the port gave it: notes may be queued from then on. -1 until then.
    private(set) var doorbell: Int32 = -1
    /// Reads of the side channel for the doorbell so far (`pickUpDoorbell`).
    private var doorbellReads = 0
    /// Where the last component sent in the ring started, while nothing else was sent on
    /// its connection after it: the next may be queued after it (`QueuedNote.after`).
    var lastStart: UInt64?
    /// Where the last note queued since the last message sent over ZeroMQ on its
    /// connection started, if one was: the next message there must follow a fence
    /// (`ThreadPortState.fenceQueuedNotes`), or the port could deliver it before them.
    var queuedThrough: UInt64?
    /// Notes queued so far (`published`).
    private var published: UInt64 = 0

    /// Makes a ring of `capacity` bytes of data (a multiple of 4096): a memory file sealed
    /// against shrinking, growing and further seals, mapped, its header written.
    init(capacity: Int = SharedRingLayout.defaultCapacity) throws(SystemCallError) {
        precondition(capacity > 0 && capacity % 4096 == 0 && capacity <= SharedRingLayout.maxCapacity)
        let fd = try Kernel.memoryFile(named: "runloopkit-ring")
        let mapping: UnsafeMutableRawBufferPointer
        do {
            try Kernel.setSize(fd, to: SharedRingLayout.headerSize + capacity)
            try Kernel.addSeals([.shrink, .grow, .seal], to: fd)
            mapping = try Kernel.mapForReadingAndWriting(fd, count: SharedRingLayout.headerSize + capacity)
        } catch {
            Kernel.close(fd)
            throw error
        }
        let base = mapping.baseAddress.unsafelyUnwrapped
        for (index, byte) in SharedRingLayout.magic.enumerated() { base.storeBytes(of: byte, toByteOffset: index, as: UInt8.self) }
        base.storeBytes(of: SharedRingLayout.version, toByteOffset: 4, as: UInt8.self)
        base.storeBytes(of: UInt64(capacity).littleEndian, toByteOffset: SharedRingLayout.capacityOffset, as: UInt64.self)
        (self.descriptor, self.mapping, self.capacity) = (fd, mapping, capacity)
        header = SharedRingHeader(base: base)
    }

    deinit {
        if descriptor >= 0 { Kernel.close(descriptor) }
        if doorbell >= 0 { Kernel.close(doorbell) }
        try? Kernel.unmap(UnsafeRawBufferPointer(mapping))
    }

    /// The receiver has its own descriptor of the ring: the sender's closes.
    func descriptorAnnounced() {
        guard descriptor >= 0 else { return }
        Kernel.close(descriptor)
        descriptor = -1
    }

    /// Reads the port's doorbell off `channel` if it came (the port sends it once it mapped
    /// the ring): at each send until it came, the first 64 times, then at the port checks
    /// (`force`) only, so that a port that gives none costs a read per 100 ms.
    func pickUpDoorbell(from channel: DescriptorSender, force: Bool = false) {
        guard doorbell < 0, force || doorbellReads < 64 else { return }
        doorbellReads += 1
        if let fd = channel.readDoorbell(for: token) { doorbell = fd }
    }

    /// Queues the note of `length` bytes at `start` (written, not committed yet), message
    /// `id`, to be delivered after the component at `after`; rings the doorbell if the
    /// port asked for it (`armed`). False when the queue is full or there is no doorbell:
    /// send the note over ZeroMQ.
    func enqueue(id: Int32, start: UInt64, length: Int, after: UInt64) -> Bool {
        guard doorbell >= 0 else { return false }
        let consumed = header.consumed.load(ordering: .acquiring)
        guard consumed <= published, published - consumed < UInt64(SharedRingLayout.queueSlots) else { return false }
        QueuedNote(after: after, start: start, length: UInt64(length), id: id).write(to: header.queueEntry(published))
        published += 1
        header.published.store(published, ordering: .sequentiallyConsistent)
        if header.armed.load(ordering: .sequentiallyConsistent) != 0,
           header.armed.exchange(0, ordering: .sequentiallyConsistent) != 0 {
            var byte: UInt8 = 1 // never waits: a full doorbell has woken the port already
            _ = try? withUnsafeBytes(of: &byte) { bytes throws(SystemCallError) in
                try Kernel.sendWithDescriptors(doorbell, bytes, descriptors: [])
            }
        }
        return true
    }

    /// Where `count` bytes (1 up to `capacity`) go next.
    enum Room {
        /// Free: write the bytes there, send their note, then `commit`.
        case free(start: UInt64, bytes: UnsafeMutableRawBufferPointer)
        /// Not free yet: the receiver holds what is there. Wait (`waitForRoom`) until the
        /// tail reaches `wakeAt`: half the window given back, or more if the bytes need it.
        case full(wakeAt: UInt64)
        /// The header's tail says what no receiver could (before what was given back, or
        /// past the head): the ring cannot be trusted and is not used again.
        case broken
    }

    /// Where `count` bytes go: at the head, or at the start of the data if they would
    /// run past the window's end there (a component is never split). The window, the
    /// part of the data in use, is eight components of this size (1 MiB at least, the
    /// whole ring at most): the bytes in flight stay within it, so that a stream of
    /// components small beside the ring keeps writing and reading the same memory, in the
    /// processors' caches, rather than all of the ring in turn.
    func room(for count: Int) -> Room {
        precondition(count > 0 && count <= capacity)
        let tail = header.tail.load(ordering: .acquiring)
        guard tail <= head, head - tail <= UInt64(capacity) else { return .broken }
        let window = min(capacity, max(8 * count, 4 << 20))
        let offset = Int(head % UInt64(capacity))
        let start = offset + count <= window ? head : head + UInt64(capacity - offset)
        guard start + UInt64(count) - tail <= UInt64(capacity) else {
            let needed = start + UInt64(count) - UInt64(capacity) // the tail that frees these bytes (past the tail: no overflow)
            return .full(wakeAt: max(needed, head - min(head, UInt64(window / 2))))
        }
        let at = Int(start % UInt64(capacity))
        return .free(start: start, bytes: UnsafeMutableRawBufferPointer(
            start: mapping.baseAddress.unsafelyUnwrapped + SharedRingLayout.headerSize + at, count: count))
    }

    /// The component at `start`, of `count` bytes, was sent: the head moves past it.
    func commit(start: UInt64, count: Int) {
        head = start + UInt64(count)
    }

    /// Sleeps until the receiver gives back bytes up to `wakeAt` (`Room.full`), or until
    /// `deadline`: false at the deadline, true when woken (maybe early: look at the room
    /// again). Says what it waits for first (`waitingFor`, which the receiver reads after
    /// each give-back, waking it once the tail reached it), and reads the tail again after
    /// saying so, so that a give-back in between is never missed. One wake-up per half
    /// window, not per component. `doneWaiting()` once there is room.
    func waitForRoom(wakeAt: UInt64, before deadline: Deadline) -> Bool {
        header.waitingFor.store(wakeAt, ordering: .sequentiallyConsistent)
        let tail = header.tail.load(ordering: .sequentiallyConsistent)
        guard tail < wakeAt else { return true }
        return (try? Kernel.waitOnSharedWord(header.tailWord, while: UInt32(truncatingIfNeeded: tail), before: deadline)) ?? true
    }

    /// The sender no longer waits: the receiver stops waking it. Only the sender clears
    /// `waitingFor`, so a wait that starts again is never cleared by a late give-back.
    func doneWaiting() {
        header.waitingFor.store(0, ordering: .sequentiallyConsistent)
    }
}
