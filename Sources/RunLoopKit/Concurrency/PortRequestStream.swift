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
/// buffer, back-pressure and end (see ``PortMessageStream``). A one-way message sent to
/// the port is not delivered: it is dropped and counted as `noHandler`. A request taken
/// from the stream and let go without its right being used (or one discarded when the
/// stream ends) is answered with a no reply at once.
public struct PortRequestStream: AsyncSequence, Sendable {
    public typealias Element = PortRequest
    public typealias Failure = Never

    let buffer: PortMessageBuffer<PortRequest>
    /// Ends the stream if it is released without being iterated.
    private let handle: StreamHandle<PortRequest>

    init(buffer: PortMessageBuffer<PortRequest>) {
        self.buffer = buffer
        handle = StreamHandle(buffer: buffer)
    }

    /// The policy the stream was made with.
    public var bufferingPolicy: PortMessageStream.BufferingPolicy { buffer.policy }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(buffer: buffer, lifetime: buffer.beginIteration() ? IterationLifetime(buffer: buffer) : nil)
    }

    /// The stream's iterator. Not `Sendable`: the one task that iterates owns it; releasing
    /// it ends the stream.
    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Element = PortRequest
        public typealias Failure = Never

        let buffer: PortMessageBuffer<PortRequest>
        /// Ends the stream when the iterator is released; nil for a second iterator.
        private let lifetime: IterationLifetime<PortRequest>?

        init(buffer: PortMessageBuffer<PortRequest>, lifetime: IterationLifetime<PortRequest>?) {
            self.buffer = buffer
            self.lifetime = lifetime
        }

        /// The next request, waiting for one if none is buffered; nil once the stream ended.
        public mutating func next() async -> PortRequest? {
            guard lifetime != nil else { return nil }
            return await buffer.next(isolation: nil)
        }

        /// The same, staying on the caller's actor (no hop per request).
        public mutating func next(isolation actor: isolated (any Actor)?) async -> PortRequest? {
            guard lifetime != nil else { return nil }
            return await buffer.next(isolation: actor)
        }
    }
}

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
        let buffer = PortMessageBuffer<PortRequest>(policy: bufferingPolicy)
        let attachment = PortStreamAttachment(port: self, buffer: buffer) { token, port in
            .deferring { [weak port] message, right in
                guard let right else {
                    return port?.drop(.noHandler, "a one-way message to a request stream") ?? ()
                }
                token.deliver(PortRequest(message: message, right: right), from: port)
            }
        }
        buffer.attachment = attachment
        attachment.attach()
        return PortRequestStream(buffer: buffer)
    }
}
