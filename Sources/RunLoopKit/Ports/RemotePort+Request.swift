import RunLoopCore
import RunLoopSystem

/// Request and reply from a thread that waits for the reply (`CFMessagePortSendRequest`).
extension RemotePort {
    /// Sends a request and waits for its reply (`CFMessagePortSendRequest`): the remote
    /// port's handler's return value, which comes back over the connection the request
    /// went out on. While waiting, the calling thread's run loop runs in a private reply
    /// mode only.
    ///
    /// Throws `sendTimedOut` if the remote does not take the request within `sendTimeout`,
    /// `receiveTimedOut` if no reply comes within `receiveTimeout` after it was sent
    /// (a vanished remote shows as one of these), `remoteHandlerFailed` as soon as the
    /// remote handler's failure comes back in its place, `authenticationFailed` if a CURVE
    /// handshake fails, or a system error (`.system`).
    public func sendRequest(_ message: LoopMessage, sendTimeout: Duration = .seconds(5),
                            receiveTimeout: Duration = .seconds(5)) throws(PortError) -> LoopMessage {
        try ThreadPortState.withCurrent { (state) throws(PortError) in
            try sendRequest(message, from: state, sendTimeout: sendTimeout, receiveTimeout: receiveTimeout)
        }
    }

    private func sendRequest(_ message: LoopMessage, from state: ThreadPortState, sendTimeout: Duration,
                             receiveTimeout: Duration) throws(PortError) -> LoopMessage {
        guard let replies = state.replyReceiver as? PendingReplies else {
            preconditionFailure("sendRequest on a thread that serves async requests")
        }
        let (id, connection) = try state.sendRequest(message, to: self, before: .after(sendTimeout))
        replies.begin(id)
        defer { connection.replySettled() }
        let deadline = Deadline.after(receiveTimeout)
        // The connection waits for its reply in this thread's loop: its `loop` is that
        // loop, read without `current`'s look-up of the thread-local key.
        let loop = connection.loop ?? ThreadRunLoop.current
        while true {
            // The reply cannot have come yet: run first, then look.
            _ = loop.run(mode: PendingReplies.mode, until: deadline, returnAfterSourceHandled: true)
            if let reply = try replies.take(id) { return reply }
            guard Deadline.now() < deadline else {
                replies.abandon(id)
                throw PortError.loggedTimeout(.receiveTimedOut(address))
            }
        }
    }
}
