import Glibc
import RunLoopCore
import RunLoopSystem

/// The receiving side of a shared ring (`SharedRingLayout`): a port maps the ring a sender
/// gave it on its side channel, after checking that it cannot fault or grow under the
/// port (a memory file sealed against shrinking, of the size its header says, within
/// `maxCapacity`); the data read-only, the header page readable and writable. A note's
/// bytes are read where they lie (`bytes(of:)`, checked against the ring's bounds), and
/// given back once the handler is done with them (`giveBack(endingAt:)`).
///
/// What a hostile sender can do: write the bytes while the port reads them (it owns the
/// memory: a well-behaved one never writes what it has not got back), or name bytes of
/// its own ring out of order; never make the port read outside the ring or map without bound.
///
/// Thread safety: none; the port's loop thread's.
final class MappedRing {
    /// Why a sender's ring was refused.
    enum Refusal: Error, Equatable {
        /// Not a memory file sealed against shrinking (it could fault the port's reads).
        case notSealed
        /// Its header or size is not a ring's (`SharedRingLayout`), or it is too large.
        case badLayout
        /// A kernel call failed (`fstat`, `mmap`).
        case system(SystemCallError)
    }

    let capacity: Int
    /// The whole file, read-only: the data starts at `SharedRingLayout.headerSize`.
    private let data: UnsafeRawBufferPointer
    /// The header page, readable and writable, for `tail` and `waitingFor`.
    private let headerPage: UnsafeMutableRawBufferPointer
    private let header: SharedRingHeader
    /// The highest position given back: the tail, as this side knows it.
    private var givenBack: UInt64 = 0
    /// The regions lent to handlers (`resolve`, `take`), by their end, in the order lent,
    /// and whether each came back: the tail passes a region only once it and every region
    /// lent before it came back, so that a handler's nested run, which reads and gives
    /// back later regions first, never frees one still being read.
    private var lent: [(end: UInt64, back: Bool)] = []
    /// The port's end of the doorbell it gave the sender (`DescriptorPacket.doorbell`) and
    /// its watch in the loop's poll set, or -1: then the sender queues no notes.
    var doorbell: Int32 = -1
    var doorbellWatch: LoopHousekeeping?
    /// Whether the port reads the ring's queue: since it gave the sender a doorbell, and
    /// after that closed (what was queued is still delivered).
    var queueOpen = false
    /// Where the last component delivered from this ring started (by a note over ZeroMQ or
    /// a queued one): a queued note is next if it comes after it (`QueuedNote.after`).
    private var lastDelivered: UInt64?
    /// The last start a fence named: queued notes up to it are delivered whatever came
    /// before them (what they come after was lost, or dropped).
    private var fenceThrough: UInt64?
    /// Queued notes taken (`consumed`, as this side knows it).
    private var consumed: UInt64 = 0
    /// The queue said what no sender would (more notes than it holds): not read again.
    private(set) var queueBroken = false

    /// Maps the ring in `fd` (which stays the caller's), or refuses it.
    init(checking fd: Int32) throws(Refusal) {
        guard let seals = try? Kernel.seals(of: fd), seals.contains(.shrink) else { throw .notSealed }
        let size: Int
        do {
            size = Int(try Kernel.status(fd).st_size)
        } catch {
            throw .system(error)
        }
        guard size > SharedRingLayout.headerSize, size <= SharedRingLayout.headerSize + SharedRingLayout.maxCapacity else {
            throw .badLayout
        }
        let headerPage: UnsafeMutableRawBufferPointer
        do {
            headerPage = try Kernel.mapForReadingAndWriting(fd, count: SharedRingLayout.headerSize)
        } catch {
            throw .system(error)
        }
        let header = SharedRingHeader(base: headerPage.baseAddress.unsafelyUnwrapped)
        let capacity = header.capacity
        guard header.hasMagicAndVersion, capacity > 0, capacity % 4096 == 0,
              capacity == UInt64(size - SharedRingLayout.headerSize) else {
            try? Kernel.unmap(UnsafeRawBufferPointer(headerPage))
            throw .badLayout
        }
        do {
            data = try Kernel.mapForReading(fd, count: size)
        } catch {
            try? Kernel.unmap(UnsafeRawBufferPointer(headerPage))
            throw .system(error)
        }
        (self.headerPage, self.header, self.capacity) = (headerPage, header, Int(capacity))
        givenBack = header.tail.load(ordering: .acquiring)
        consumed = header.consumed.load(ordering: .acquiring)
    }

    deinit {
        try? Kernel.unmap(data)
        try? Kernel.unmap(UnsafeRawBufferPointer(headerPage))
    }

    /// The bytes `note` names, where they lie; nil for bytes outside the ring (a note no
    /// sender of this ring would write), or none.
    func bytes(of note: SharedNote) -> UnsafeRawBufferPointer? {
        bytes(at: note.start, count: note.length)
    }

    /// The `count` bytes at position `start`, where they lie; nil outside the ring, or none.
    func bytes(at start: UInt64, count: UInt64) -> UnsafeRawBufferPointer? {
        guard count > 0, count <= UInt64(capacity) else { return nil }
        let offset = Int(start % UInt64(capacity))
        guard offset + Int(count) <= capacity else { return nil }
        return UnsafeRawBufferPointer(rebasing: data[SharedRingLayout.headerSize + offset
                                                    ..< SharedRingLayout.headerSize + offset + Int(count)])
    }

    /// The bytes of a note that came over ZeroMQ, as `bytes(of:)`, lent until
    /// `giveBack(endingAt:)`: queued notes after it may follow it now. A note of no bytes is a **fence** (the sender queued notes up to
    /// its start and sends a message over ZeroMQ next): those notes are delivered before
    /// anything else (`nextQueued()`), and nil is returned (the fence is no message).
    func resolve(_ note: SharedNote) -> UnsafeRawBufferPointer? {
        guard note.length > 0 else {
            fenceThrough = max(fenceThrough ?? 0, note.start)
            return nil
        }
        guard let bytes = bytes(of: note) else { return nil }
        lastDelivered = note.start
        lent.append((note.start &+ note.length, false))
        return bytes
    }

    /// The next queued note, if there is one and it may be delivered now: it comes after
    /// the last component delivered, or a fence named it. Read once, where the sender
    /// wrote it; `take(_:)` once delivered.
    func nextQueued() -> QueuedNote? {
        guard queueOpen, !queueBroken else { return nil }
        return nextQueued(published: header.published.load(ordering: .acquiring))
    }

    private func nextQueued(published: UInt64) -> QueuedNote? {
        guard published != consumed else { return nil }
        guard published > consumed, published - consumed <= UInt64(SharedRingLayout.queueSlots) else {
            queueBroken = true
            return nil
        }
        let note = QueuedNote(reading: header.queueEntry(consumed))
        guard note.after == lastDelivered || fenceThrough.map({ note.start <= $0 }) == true else { return nil }
        return note
    }

    /// Takes `note` (from `nextQueued()`) off the queue: the next one may follow it, and
    /// its entry may be written again. Returns its bytes, lent until `giveBack(endingAt:)`;
    /// nil for bytes outside the ring (nothing lent).
    func take(_ note: QueuedNote) -> UnsafeRawBufferPointer? {
        consumed += 1
        header.consumed.store(consumed, ordering: .releasing)
        lastDelivered = note.start
        guard let bytes = bytes(at: note.start, count: note.length) else { return nil }
        lent.append((note.start &+ note.length, false))
        return bytes
    }

    /// Asks the sender to ring the doorbell at its next queued note, then looks again:
    /// true if a note may be delivered now (one queued meanwhile, or waiting already).
    /// A ring whose doorbell closed (its sender ended) is not armed, but what it queued
    /// before is still there to deliver.
    func arm() -> Bool {
        guard queueOpen, !queueBroken else { return false }
        // Armed already (the sender has not rung since): what it queues after will ring.
        if doorbell >= 0, header.armed.load(ordering: .relaxed) == 0 {
            header.armed.store(1, ordering: .sequentiallyConsistent)
        }
        return nextQueued(published: header.published.load(ordering: .sequentiallyConsistent)) != nil
    }

    /// Gives back the region lent that ends at `end` (a note's start plus its length);
    /// once every region lent before it came back too, the tail moves past them all, and
    /// the sender may write there again. Regions are lent in the notes' order, so the
    /// tail only moves forward; the sender is woken once the tail reached what it waits
    /// for (`waitingFor`, which it alone clears).
    func giveBack(endingAt end: UInt64) {
        guard let index = lent.firstIndex(where: { $0.end == end && !$0.back }) else { return }
        lent[index].back = true
        var end = givenBack
        while let first = lent.first, first.back {
            end = first.end
            lent.removeFirst()
        }
        guard end > givenBack else { return }
        givenBack = end
        header.tail.store(end, ordering: .sequentiallyConsistent)
        let waitingFor = header.waitingFor.load(ordering: .sequentiallyConsistent)
        if waitingFor != 0, end >= waitingFor { Kernel.wakeSharedWord(header.tailWord) }
    }
}
