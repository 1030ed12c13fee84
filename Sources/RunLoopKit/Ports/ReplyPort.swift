import Glibc
import Synchronization

/// A thread's private port for the replies to its requests (`CFMessagePortSendRequest`'s
/// reply mode). It lives in a mode of its own, so that while a request waits the loop
/// services nothing else: the thread is neither deadlocked nor re-entered by other sources.
final class ReplyPort {
    /// The private mode the requester's loop runs in while it waits.
    static let mode = LoopMode("com.runloopkit.reply")

    let port: LocalPort
    /// Requests waiting for a reply, with the reply once it came; owner thread only. A
    /// thread waits for one request at a time, more only while a handler that runs in the
    /// wait makes a request of its own, so a short list beats hashing.
    private var waiting: [(id: UInt64, reply: LoopMessage?)] = []
    private var lastID: UInt64 = 0
    private static let processSerial = Atomic<Int>(0)

    init() throws(PortError) {
        port = try LocalPort()
        port.replyHandler = { [unowned self] id, message in self.received(message, for: id) }
        ThreadRunLoop.current.add(port, to: ReplyPort.mode)
    }

    /// A fresh correlation id, now waited for.
    func begin() -> UInt64 {
        lastID &+= 1
        waiting.append((lastID, nil))
        return lastID
    }

    /// The reply to `id` if it came; it is then no longer waited for.
    func take(_ id: UInt64) -> LoopMessage? {
        guard let index = waiting.lastIndex(where: { $0.id == id }), let reply = waiting[index].reply else { return nil }
        waiting.remove(at: index)
        return reply
    }

    /// Stops waiting for `id`: a reply that comes later is dropped and logged.
    func abandon(_ id: UInt64) {
        guard let index = waiting.lastIndex(where: { $0.id == id }) else { return }
        waiting.remove(at: index)
    }

    /// The address `target` can reply to (see `LocalPort.replyAddress(toward:privateName:)`).
    func replyPort(for target: RemotePort) throws(PortError) -> RemotePort {
        try port.replyAddress(toward: target) {
            "runloopkit-reply.\(getpid()).\(ReplyPort.processSerial.add(1, ordering: .relaxed).newValue)"
        }
    }

    private func received(_ message: LoopMessage, for id: UInt64) {
        guard let index = waiting.lastIndex(where: { $0.id == id && $0.reply == nil }) else {
            return port.drop(.lateReply, "late, repeated or unknown reply, correlation id \(id)")
        }
        waiting[index].reply = message
    }
}

extension RemotePort {
    /// Sends a request and waits for its reply (`CFMessagePortSendRequest`): the remote
    /// port's handler's return value. While waiting, the calling thread's run loop runs in
    /// a private reply mode only.
    ///
    /// Throws `sendTimedOut` if the remote does not take the request within `sendTimeout`,
    /// `receiveTimedOut` if no reply comes within `receiveTimeout` after it was sent
    /// (a vanished remote shows as one of these), or a transport error.
    public func sendRequest(_ message: LoopMessage, sendTimeout: Duration = .seconds(5),
                            receiveTimeout: Duration = .seconds(5)) throws(PortError) -> LoopMessage {
        let state = ThreadPortState.current
        let replies: ReplyPort
        if let existing = state.replyPort {
            replies = existing
        } else {
            replies = try ReplyPort()
            state.replyPort = replies
        }
        var request = message
        request.replyPort = try replies.replyPort(for: self)
        let id = replies.begin()
        do {
            try state.send(PortEnvelope(.request, request, correlationID: id), to: self, before: .after(sendTimeout))
        } catch {
            replies.abandon(id)
            throw error
        }
        let deadline = Deadline.after(receiveTimeout)
        let loop = ThreadRunLoop.current
        while true {
            // The reply cannot have come yet: run first, then look.
            _ = loop.run(mode: ReplyPort.mode, until: deadline, returnAfterSourceHandled: true)
            if let reply = replies.take(id) { return reply }
            guard Deadline.now() < deadline else {
                replies.abandon(id)
                throw RunLoopKitLog.timedOut(.receiveTimedOut(address))
            }
        }
    }
}
