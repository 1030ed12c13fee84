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
    /// The last message's bytes, or `[]`.
    private var bytes: [UInt8] = []

    /// The largest byte buffer kept for the next message. Above it a message's copy costs
    /// far more than its allocation, and a port that once received a large message should
    /// not hold its size for good: every port of a thread with thousands keeps at most this.
    static let largestKeptData = 4096

    /// The components of a message of one data component, `data` copied into the kept
    /// buffers where they have room.
    ///
    /// A message of the last one's size, the common case, is written over the last one's
    /// bytes (`withUnsafeMutableBytes` copies them first if a handler kept them), not
    /// emptied and appended to. With no buffer kept (the last message's handler kept it, as
    /// a requester's caller keeps every reply), each array is made at its size at once.
    /// (hot-path: sized-buffers (docs/optimization-tips.md))
    mutating func oneDataComponent(_ data: UnsafeRawBufferPointer) -> [LoopMessage.Component] {
        var bytes: [UInt8] = []
        swap(&bytes, &self.bytes)
        if bytes.count == data.count {
            bytes.withUnsafeMutableBytes { $0.copyMemory(from: data) }
        } else if bytes.capacity >= data.count {
            bytes.removeAll(keepingCapacity: true)
            bytes.append(contentsOf: data)
        } else {
            bytes = [UInt8](data)
        }
        guard components.capacity > 0 else { return [.data(consume bytes)] }
        var components: [LoopMessage.Component] = []
        swap(&components, &self.components)
        components.append(.data(consume bytes))
        return components
    }

    /// Takes back the buffers of `delivered`, a delivered message's components its handler
    /// is done with, if it is one data component.
    mutating func recycle(_ delivered: inout [LoopMessage.Component]) {
        guard delivered.count == 1, delivered[0].dataCapacity.map({ $0 <= Self.largestKeptData }) == true,
              case .data(let bytes) = delivered.removeLast() else {
            return
        }
        // Emptying `delivered` (`removeLast` keeps a buffer it owns alone and copies a
        // shared one first) leaves `bytes` their last owner, unless the handler kept them;
        // then the next message's write copies them first, and never writes into what a
        // handler kept.
        swap(&components, &delivered)
        self.bytes = consume bytes
    }
}

extension LoopMessage.Component {
    /// The capacity of a data component's bytes; nil for a port. (Read in place, not
    /// bound: hot-path: borrow-not-copy (docs/optimization-tips.md).)
    fileprivate var dataCapacity: Int? {
        if case .data(let bytes) = self { bytes.capacity } else { nil }
    }
}
