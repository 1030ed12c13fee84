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
        let state = ThreadPortState.current
        guard let replies = state.replyReceiver as? PendingReplies else {
            preconditionFailure("sendRequest on a thread that serves async requests")
        }
        let (id, connection) = try state.sendRequest(message, to: self, before: .after(sendTimeout))
        replies.begin(id)
        defer { connection.replySettled() }
        let deadline = Deadline.after(receiveTimeout)
        let loop = ThreadRunLoop.current
        while true {
            // The reply cannot have come yet: run first, then look.
            _ = loop.run(mode: PendingReplies.mode, until: deadline, returnAfterSourceHandled: true)
            if let outcome = replies.take(id) { return try outcome.get() }
            guard Deadline.now() < deadline else {
                replies.abandon(id)
                throw PortError.loggedTimeout(.receiveTimedOut(address))
            }
        }
    }
}

/// The async form of `sendRequest`.
extension RemotePort {
    /// Sends a request and returns its reply (the async `sendRequest`): the calling task
    /// suspends meanwhile; no thread blocks for it. The request is sent, and its reply
    /// received, by a per-process requester thread with a reply port of its own, so the
    /// caller's run loop (if it has one) is not run in a reply mode.
    ///
    /// Throws `PortError.sendTimedOut` if the remote does not take the request within
    /// `sendTimeout`, `receiveTimedOut` if no reply comes within `receiveTimeout` after it
    /// was sent, `remoteHandlerFailed`, `remoteInvalid`, or a system error (`.system`), as
    /// `sendRequest` does.
    ///
    /// Cancelling the task ends the wait at once with `CancellationError`, whatever stage the
    /// request is at: if it was not sent yet it never is; if it was, its reply is dropped
    /// when it comes (counted as a late reply). The requester and its reply port go on
    /// serving other requests. Any thread.
    nonisolated(nonsending)
    public func request(_ message: LoopMessage, sendTimeout: Duration = .seconds(5),
                        receiveTimeout: Duration = .seconds(5)) async throws -> LoopMessage {
        let exchange = RequestExchange(message: message, target: self,
                                       sendTimeout: sendTimeout, receiveTimeout: receiveTimeout)
        return try await exchange.run(on: AsyncRequester.shared.get())
    }
}
