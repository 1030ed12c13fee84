import RunLoopCore

/// A port's requests as an `AsyncSequence`, each with its reply right, so that an actor or
/// a task group serves a port:
///
///     let requests = port.requests()                 // on its owner thread, in its loop's modes
///     Task {
///         await withTaskGroup(of: Void.self) { group in
///             for await request in requests {
///                 group.addTask {
///                     guard let right = request.takeRight() else { return }
///                     right.reply(LoopMessage(id: 0, text: await work(request.message)))
///                 }
///             }
///         }
///     }
///
/// The stream is the port's handler (`PortHandler.deferring`), with a message stream's
/// buffer, back-pressure and end (see ``PortStream``). A one-way message sent to
/// the port is not delivered: it is dropped and counted as `noHandler`. A request taken
/// from the stream and let go without its right being used (or one discarded when the
/// stream ends) is answered with a no reply at once.
public typealias PortRequestStream = PortStream<PortRequest>

/// A request taken from a `PortRequestStream`: its message, and its reply right, which one
/// holder takes (`takeRight()`) to answer it. A value that may be copied and sent to any
/// task; the right itself moves once. When the last copy goes with the right still in it,
/// the request is answered with a no reply at once.
public struct PortRequest: Sendable {
    /// The request's message.
    public let message: LoopMessage
    private let request: OutstandingRequest
    /// Where the right waits for its taker; released with the right in it, the right's
    /// drop answers with a no reply.
    private let right: MovedValue<ReplyRight>

    init(message: LoopMessage, right: consuming ReplyRight) {
        self.message = message
        request = right.request
        self.right = MovedValue(right)
    }

    /// The request's reply right: the first call takes it, any later one gets nil. Any thread.
    public func takeRight() -> ReplyRight? {
        right.take()
    }

    /// Whether the requester gave the request up (see `ReplyRight.isCancelled`). Any thread.
    public var isCancelled: Bool { request.isCancelled }
}

/// A port's requests for `for await`.
extension LocalPort {
    /// The port's requests as an async sequence, each with its reply right; see
    /// ``PortRequestStream``. It becomes the port's handler as `messages()` does (at once on
    /// the owner thread, else at the owner loop's next pass), with the same buffer and
    /// back-pressure. Any thread.
    public func requests(bufferingPolicy: PortMessageStream.BufferingPolicy = .default) -> PortRequestStream {
        stream(bufferingPolicy) { token, port in
            .deferring { [weak port] message, right in
                guard let right else {
                    return port?.drop(.noHandler, "a one-way message to a request stream") ?? ()
                }
                token.deliver(PortRequest(message: message, right: right), from: port)
            }
        }
    }
}
