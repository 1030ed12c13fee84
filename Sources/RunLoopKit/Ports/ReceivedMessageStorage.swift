/// The storage of the last message a port delivered, kept for the next one: a port whose
/// handler keeps nothing of its messages then receives the common message, one data
/// component, with no allocation at all, its component array and its bytes written into
/// the buffers of the message before. A handler that keeps a message (or its bytes) keeps
/// those buffers, and the next message gets new ones, as it would without this.
///
/// Value semantics hold: a buffer is reused only when nothing else refers to it (emptying
/// one that is shared copies it first, leaving the original to its other owners). At most
/// one message's buffers are kept, its bytes only up to `largestKeptData`. The receive
/// path's alone (the owner thread's).
struct ReceivedMessageStorage {
    /// Empty, with room for a component, or `[]`.
    private var components: [LoopMessage.Component] = []
    /// Empty, with room for the last message's bytes, or `[]`.
    private var bytes: [UInt8] = []

    /// The largest byte buffer kept for the next message. Above it a message's copy costs
    /// far more than its allocation, and a port that once received a large message should
    /// not hold its size for good: every port of a thread with thousands keeps at most this.
    static let largestKeptData = 4096

    /// The components of a message of one data component, `data` copied into the kept
    /// buffers where they have room.
    /// With no buffer kept (the last message's handler kept it, as a requester's caller
    /// keeps every reply), each array is made at its size at once: appending to an empty
    /// array takes its growth path, a few hundred instructions more for the two.
    mutating func oneDataComponent(_ data: UnsafeRawBufferPointer) -> [LoopMessage.Component] {
        var bytes: [UInt8] = []
        if self.bytes.capacity >= data.count {
            swap(&bytes, &self.bytes)
            bytes.append(contentsOf: data)
        } else {
            self.bytes = []
            bytes = [UInt8](data)
        }
        guard components.capacity > 0 else { return [.data(bytes)] }
        var components: [LoopMessage.Component] = []
        swap(&components, &self.components)
        components.append(.data(bytes))
        return components
    }

    /// Takes back the buffers of `delivered`, a delivered message's components its handler
    /// is done with, if it is one data component.
    mutating func recycle(_ delivered: inout [LoopMessage.Component]) {
        guard delivered.count == 1, case .data(var bytes) = delivered[0], bytes.capacity <= Self.largestKeptData else {
            return
        }
        // `removeLast` rather than `removeAll(keepingCapacity:)`, whose generic
        // `replaceSubrange` costs a few hundred instructions: each keeps a buffer it owns
        // alone and copies a shared one first, so the next message never writes into what
        // a handler kept. Emptying `delivered` leaves `bytes` their last owner, unless the
        // handler kept them.
        delivered.removeLast()
        bytes.removeLast(bytes.count)
        swap(&components, &delivered)
        self.bytes = bytes
    }
}
