import Atomics
import RunLoopWire

/// A ring of shared memory (`docs/wire-format.md`, "Shared memory"): a memory file its
/// sender makes, seals against shrinking and growing, and gives the receiving port on its
/// side channel; a 4096-byte header page, then `capacity` bytes of data, written by the
/// sender at increasing positions (a position's byte is at `position % capacity`) and
/// given back by the receiver, in order, through the header's `tail`.
///
/// | offset | size | field    | written by | value                                          |
/// |--------|------|----------|------------|------------------------------------------------|
/// | 0      | 4    | magic    | sender     | `RLKR`                                         |
/// | 4      | 1    | version  | sender     | `01`                                           |
/// | 8      | 8    | capacity | sender     | the data's size: a multiple of 4096, at most `maxCapacity` |
/// | 64     | 8    | tail     | receiver   | every position below it is free to write again |
/// | 128    | 8    | waitingFor | sender   | 0, or the tail the sender waits for (the receiver wakes the futex on `tail`'s low half once the tail reaches it) |
/// | 192    | 8    | published | sender    | how many notes the sender queued (`QueuedNote`) |
/// | 256    | 8    | consumed | receiver   | how many queued notes the receiver took |
/// | 320    | 4    | armed    | receiver   | 1: ring the doorbell for the next queued note |
/// | 512    | 56 × 64 | queue | sender     | the queued notes, the n-th (from 0) at `512 + 64 × (n % 56)` |
package enum SharedRingLayout {
    /// The header page's size: the data starts there.
    package static let headerSize = 4096
    package static let magic: [UInt8] = [0x52, 0x4C, 0x4B, 0x52] // "RLKR"
    package static let version: UInt8 = 1
    package static let capacityOffset = 8
    package static let tailOffset = 64
    package static let waitingForOffset = 128
    package static let publishedOffset = 192
    package static let consumedOffset = 256
    package static let armedOffset = 320
    package static let queueOffset = 512
    package static let queueEntrySize = 64
    /// The notes a queue holds: what fits in the header page after `queueOffset`.
    package static let queueSlots = 56
    /// The data size of a ring RunLoopKit makes: two components of the largest size that
    /// travels in one (`largestComponent`, an image of 3840 × 2160 × 4 bytes) in flight at once.
    package static let defaultCapacity = 64 << 20
    /// The largest ring a receiver maps.
    package static let maxCapacity = 256 << 20
    /// The smallest data component that travels in shared memory: below it a component is
    /// copied into libzmq's frames as before (docs/experiments/2026-11-29-large-payloads.md).
    package static let gate = WireCodec.ownFrameThreshold
    /// The largest data component that travels in a ring of `defaultCapacity`.
    package static let largestComponent = defaultCapacity / 2
}

/// A shared data component's note (component kind 4): the ring's token, where its bytes
/// start in the ring (a position) and how many there are; 32 bytes, little-endian.
struct SharedNote: Equatable {
    let token: DescriptorToken
    let start: UInt64
    let length: UInt64

    /// The note in a received component (`WireCodec.ComponentBytes.sharedReference`); nil
    /// for a token that is not 16 bytes.
    init?(_ reference: (token: UnsafeRawBufferPointer, start: UInt64, length: UInt64)) {
        guard reference.token.count == 16 else { return nil }
        // Read in place: no array made per note.
        let token = DescriptorToken(high: UInt64(littleEndian: reference.token.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                                    low: UInt64(littleEndian: reference.token.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        self.init(token: token, start: reference.start, length: reference.length)
    }

    init(token: DescriptorToken, start: UInt64, length: UInt64) {
        (self.token, self.start, self.length) = (token, start, length)
    }

    /// Writes its 32 bytes at the start of `buffer`, with no allocation.
    func write(into buffer: UnsafeMutableRawBufferPointer) {
        precondition(buffer.count >= WireCodec.sharedComponentSize)
        buffer.storeBytes(of: token.high.littleEndian, toByteOffset: 0, as: UInt64.self)
        buffer.storeBytes(of: token.low.littleEndian, toByteOffset: 8, as: UInt64.self)
        buffer.storeBytes(of: start.littleEndian, toByteOffset: 16, as: UInt64.self)
        buffer.storeBytes(of: length.littleEndian, toByteOffset: 24, as: UInt64.self)
    }
}

/// The header page of a mapped ring, as both sides read and write it: `tail` and
/// `waitingFor` atomically (sequentially consistent, so that a sender that says it waits
/// and then reads `tail`, and a receiver that writes `tail` and then reads `waitingFor`,
/// never both miss the other).
struct SharedRingHeader {
    let base: UnsafeMutableRawPointer

    var tail: UnsafeAtomic<UInt64> {
        UnsafeAtomic(at: (base + SharedRingLayout.tailOffset).assumingMemoryBound(to: UInt64.AtomicRepresentation.self))
    }

    var waitingFor: UnsafeAtomic<UInt64> {
        UnsafeAtomic(at: (base + SharedRingLayout.waitingForOffset).assumingMemoryBound(to: UInt64.AtomicRepresentation.self))
    }

    /// The futex word a waiting sender sleeps on: `tail`'s low half (little-endian), which
    /// changes whenever the receiver gives bytes back.
    var tailWord: UnsafeMutablePointer<UInt32> {
        UnsafeMutablePointer(OpaquePointer(base + SharedRingLayout.tailOffset))
    }

    /// How many notes the sender queued: it writes a note's entry, then this.
    var published: UnsafeAtomic<UInt64> {
        UnsafeAtomic(at: (base + SharedRingLayout.publishedOffset).assumingMemoryBound(to: UInt64.AtomicRepresentation.self))
    }

    /// How many queued notes the receiver took: their entries may be written again.
    var consumed: UnsafeAtomic<UInt64> {
        UnsafeAtomic(at: (base + SharedRingLayout.consumedOffset).assumingMemoryBound(to: UInt64.AtomicRepresentation.self))
    }

    /// 1 while the receiver wants the doorbell rung for the next queued note: it set it
    /// before reading `published` once more, the sender takes it (0) after writing
    /// `published` (both sequentially consistent: never both miss the other).
    var armed: UnsafeAtomic<UInt32> {
        UnsafeAtomic(at: (base + SharedRingLayout.armedOffset).assumingMemoryBound(to: UInt32.AtomicRepresentation.self))
    }

    /// The entry of the `index`-th queued note (from 0).
    func queueEntry(_ index: UInt64) -> UnsafeMutableRawPointer {
        base + SharedRingLayout.queueOffset + Int(index % UInt64(SharedRingLayout.queueSlots)) * SharedRingLayout.queueEntrySize
    }

    var capacity: UInt64 {
        UInt64(littleEndian: base.loadUnaligned(fromByteOffset: SharedRingLayout.capacityOffset, as: UInt64.self))
    }

    var hasMagicAndVersion: Bool {
        SharedRingLayout.magic.indices.allSatisfy { base.load(fromByteOffset: $0, as: UInt8.self) == SharedRingLayout.magic[$0] }
            && base.load(fromByteOffset: 4, as: UInt8.self) == SharedRingLayout.version
    }
}

/// A note the sender queued in its ring's header page rather than sent over ZeroMQ
/// (`docs/wire-format.md`, "Shared memory", the queue): a message of id `id` whose one data
/// component is `length` bytes at `start`, to be delivered after the ring message that
/// started at `after` (the one before it on its sender's connection); 64 bytes,
/// little-endian: `after`, `start`, `length` (64-bit each), `id` (32-bit), 28 zero bytes.
struct QueuedNote: Equatable {
    let after: UInt64
    let start: UInt64
    let length: UInt64
    let id: Int32

    /// Reads an entry once (the sender owns the memory: a note read twice could differ).
    init(reading entry: UnsafeRawPointer) {
        after = UInt64(littleEndian: entry.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        start = UInt64(littleEndian: entry.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        length = UInt64(littleEndian: entry.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
        id = Int32(littleEndian: entry.loadUnaligned(fromByteOffset: 24, as: Int32.self))
    }

    init(after: UInt64, start: UInt64, length: UInt64, id: Int32) {
        (self.after, self.start, self.length, self.id) = (after, start, length, id)
    }

    func write(to entry: UnsafeMutableRawPointer) {
        entry.storeBytes(of: after.littleEndian, toByteOffset: 0, as: UInt64.self)
        entry.storeBytes(of: start.littleEndian, toByteOffset: 8, as: UInt64.self)
        entry.storeBytes(of: length.littleEndian, toByteOffset: 16, as: UInt64.self)
        entry.storeBytes(of: id.littleEndian, toByteOffset: 24, as: Int32.self)
    }
}
