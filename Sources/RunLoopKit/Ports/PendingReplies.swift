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

    private var waiting: [(id: UInt64, reply: LoopMessage?)] = []

    /// Waits for the reply to `id` from now on.
    func begin(_ id: UInt64) {
        waiting.append((id, nil))
    }

    /// The reply to `id` if it came; it is then no longer waited for.
    func take(_ id: UInt64) -> LoopMessage? {
        guard let index = waiting.lastIndex(where: { $0.id == id }), let reply = waiting[index].reply else { return nil }
        waiting.remove(at: index)
        return reply
    }

    /// Stops waiting for `id`: a reply that comes later is dropped as late.
    func abandon(_ id: UInt64) {
        guard let index = waiting.lastIndex(where: { $0.id == id }) else { return }
        waiting.remove(at: index)
    }

    func received(_ reply: LoopMessage, for id: UInt64) -> Bool {
        guard let index = waiting.lastIndex(where: { $0.id == id && $0.reply == nil }) else { return false }
        waiting[index].reply = reply
        return true
    }
}
