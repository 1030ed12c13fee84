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
