import RunLoopCore

/// The requests a thread waits on in `sendRequest`, with their replies once they came
/// (`CFMessagePortSendRequest`'s reply mode).
///
/// While a request waits, its thread's loop runs in a private mode that holds only the
/// connections with replies to come, so that the thread is neither deadlocked nor
/// re-entered by its other sources. A thread waits for one request at a time, so a short
/// list beats hashing. Thread-confined, like the thread's `ThreadPortState`.
final class PendingReplies: ReplyReceiver {
    /// The private mode the requester's loop runs in while it waits.
    static let mode = LoopMode("com.runloopkit.reply")

    var replyMode: LoopMode { PendingReplies.mode }

    /// A request waited on, and its reply (or the remote handler's failure) once it came.
    /// (A struct, not a tuple: the standard library copies a tuple holding a message
    /// through generic witnesses.)
    private struct Waiting {
        let id: UInt64
        /// The connection it went out on (compared, never dereferenced).
        let connection: ObjectIdentifier
        /// Stored, not derived from the two below: reading it in place copies nothing.
        var isSettled = false
        var reply: LoopMessage?
        var failure: PortError?
    }

    // Its thread's alone, like the `ThreadPortState` that holds it; see architecture.md.
    @exclusivity(unchecked) private var waiting: [Waiting] = []

    /// Waits for the reply to `id`, sent on `connection`, from now on.
    @inline(__always)
    func begin(_ id: UInt64, on connection: PortConnection) {
        begin(id, connection: ObjectIdentifier(connection))
    }

    /// Waits for the reply to `id`, sent on the connection `connection` identifies.
    func begin(_ id: UInt64, connection: ObjectIdentifier) {
        waiting.append(Waiting(id: id, connection: connection))
    }

    /// The reply to `id` if it came, or the remote handler's failure thrown; it is then no
    /// longer waited for. Nil while it has not come.
    func take(_ id: UInt64) throws(PortError) -> LoopMessage? {
        guard let index = index(of: id), waiting[index].isSettled else { return nil }
        var settled = waiting.remove(at: index)
        if let failure = settled.failure { throw failure }
        return settled.reply.take() // moved out, not copied and released
    }

    /// Stops waiting for `id`: a reply that comes later is dropped as late.
    func abandon(_ id: UInt64) {
        guard let index = index(of: id) else { return }
        waiting.remove(at: index)
    }

    func received(_ reply: consuming LoopMessage, for id: UInt64) -> Bool {
        guard let index = index(of: id), !waiting[index].isSettled else { return false }
        waiting[index].reply = consume reply
        waiting[index].isSettled = true
        return true
    }

    func failed(_ failure: PortError, for id: UInt64) -> Bool {
        guard let index = index(of: id), !waiting[index].isSettled else { return false }
        waiting[index].failure = failure
        waiting[index].isSettled = true
        return true
    }

    func connectionLost(_ connection: PortConnection, _ failure: PortError) -> Int {
        connectionLost(ObjectIdentifier(connection), failure)
    }

    /// Fails the requests waited for on the connection `lost` identifies; returns how many.
    func connectionLost(_ lost: ObjectIdentifier, _ failure: PortError) -> Int {
        var failed = 0
        for index in waiting.indices where waiting[index].connection == lost && !waiting[index].isSettled {
            waiting[index].failure = failure
            waiting[index].isSettled = true
            failed += 1
        }
        return failed
    }

    /// Where `id` waits, searched from the newest (the one a thread waits on now). By hand:
    /// `lastIndex(where:)` hands its closure a copy of each element, retaining its reply.
    private func index(of id: UInt64) -> Int? {
        var index = waiting.count
        while index > 0 {
            index -= 1
            if waiting[index].id == id { return index }
        }
        return nil
    }
}
