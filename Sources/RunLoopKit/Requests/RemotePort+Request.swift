import RunLoopCore
import RunLoopSystem

/// Request and reply from a thread that waits for the reply (`CFMessagePortSendRequest`).
extension RemotePort {
    /// Sends a request and waits for its reply (`CFMessagePortSendRequest`): the remote
    /// port's handler's return value, which comes back over the connection the request
    /// went out on. While waiting, the calling thread's run loop runs in a private reply
    /// mode only. Any thread, the async requests' own included: the request names where
    /// its reply goes.
    ///
    /// Throws `sendTimedOut` if the remote does not take the request within `sendTimeout`,
    /// `receiveTimedOut` if no reply comes within `receiveTimeout` after it was sent (the
    /// port is then told, with a cancel, that the request was given up),
    /// `remoteHandlerFailed` as soon as the remote handler's failure comes back in its
    /// place, `noReply` as soon as the server lets go of it unanswered, `remoteInvalid` as
    /// soon as the port is known gone (an in-process port closed, a named port's owner
    /// dead, a connection lost while the reply was awaited: its peer died or stopped
    /// answering heartbeats), `authenticationFailed` if a CURVE handshake fails, or a
    /// system error (`.system`).
    public func sendRequest(_ message: LoopMessage, sendTimeout: Duration = .seconds(5),
                            receiveTimeout: Duration = .seconds(5)) throws(PortError) -> LoopMessage {
        try ThreadPortState.withCurrent { (state) throws(PortError) in
            try sendRequest(message, from: state, sendTimeout: sendTimeout, receiveTimeout: receiveTimeout)
        }
    }

    private func sendRequest(_ message: LoopMessage, from state: ThreadPortState, sendTimeout: Duration,
                             receiveTimeout: Duration) throws(PortError) -> LoopMessage {
        let replies = state.pendingReplies
        let (id, connection) = try state.sendRequest(message, to: self, replyTo: .waiting, before: .after(sendTimeout))
        replies.begin(id, on: connection)
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
                connection.sendCancel(correlationID: id, messageID: message.id)
                throw PortError.loggedTimeout(.receiveTimedOut(address))
            }
        }
    }
}
