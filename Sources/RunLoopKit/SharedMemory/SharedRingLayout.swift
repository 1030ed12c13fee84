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
package enum SharedRingLayout {
    /// The header page's size: the data starts there.
    package static let headerSize = 4096
    package static let magic: [UInt8] = [0x52, 0x4C, 0x4B, 0x52] // "RLKR"
    package static let version: UInt8 = 1
    package static let capacityOffset = 8
    package static let tailOffset = 64
    package static let waitingForOffset = 128
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

    var capacity: UInt64 {
        UInt64(littleEndian: base.loadUnaligned(fromByteOffset: SharedRingLayout.capacityOffset, as: UInt64.self))
    }

    var hasMagicAndVersion: Bool {
        SharedRingLayout.magic.indices.allSatisfy { base.load(fromByteOffset: $0, as: UInt8.self) == SharedRingLayout.magic[$0] }
            && base.load(fromByteOffset: 4, as: UInt8.self) == SharedRingLayout.version
    }
}
