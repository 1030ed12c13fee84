/// A port's messages (``PortMessageStream``, from `LocalPort.messages()`) or requests
/// (``PortRequestStream``, from `LocalPort.requests()`) as an `AsyncSequence`, for code that
/// prefers `for await` to a handler:
///
///     let port = try LocalPort()                     // on its owner thread, in its loop's modes
///     ThreadRunLoop.current.add(port, to: .default)
///     let messages = port.messages(bufferingPolicy: .bounded(64))
///     Task {
///         for await message in messages { print(message.id) }   // ends once the port is invalidated
///     }
///
/// The stream is the port's handler: the port's owner thread still receives each message
/// in its loop's passes, and hands it to the stream, which keeps it until the consumer
/// takes it (or hands it over directly to a waiting consumer). Elements come in the order
/// the port received them.
///
/// **Back-pressure.** The buffer holds at most `bufferingPolicy.capacity` elements. When it
/// is full, the port is paused in its modes (its descriptor leaves the poll set and none of
/// its messages is delivered), so its messages wait in its ZeroMQ queue (up to its
/// `receiveHighWaterMark`), and beyond that its senders wait, and fail with
/// `PortError.sendTimedOut` at their deadlines. Once the consumer has taken the buffer
/// down to half, the port resumes. Nothing is dropped. A paused port stays in its modes,
/// so a run in them does not end as `.finished` for want of sources, and snapshots show it.
///
/// **End.** The consumer gets the elements buffered, then `nil`, once the port is
/// invalidated (its owner thread exiting included) or its handler is replaced (another
/// `messages()` or `requests()` call included). The stream ends for good, with the
/// elements not yet taken discarded, when the consumer stops: its iterator is released
/// (`break` out of the loop, say), the stream is released without being iterated, or the
/// consuming task is cancelled while it waits (`next()` then returns nil). The port's
/// handler is then removed, so later messages are dropped as for a port without a handler
/// (counted as `noHandler` and logged), and the port resumes if it was paused. A stream is
/// iterated once: a second iterator ends at once.
///
/// Thread safety and `Sendable`: the stream may be passed to any task and iterated from
/// any thread, by one consumer at a time (two concurrent `next()` calls trap). Its buffer
/// is behind a lock; the port is touched on its owner thread only.
public struct PortStream<Element: Sendable>: AsyncSequence, Sendable {
    public typealias Failure = Never
    /// How many elements the stream keeps for its consumer; one type for every stream.
    public typealias BufferingPolicy = PortStreamBufferingPolicy

    let buffer: PortMessageBuffer<Element>
    /// Ends the stream if it is released without being iterated.
    private let handle: StreamHandle<Element>

    init(buffer: PortMessageBuffer<Element>) {
        self.buffer = buffer
        handle = StreamHandle(buffer: buffer)
    }

    /// The policy the stream was made with.
    public var bufferingPolicy: BufferingPolicy { buffer.policy }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(buffer: buffer, lifetime: buffer.beginIteration() ? IterationLifetime(buffer: buffer) : nil)
    }

    /// The stream's iterator. Not `Sendable`: the one task that iterates owns it; releasing
    /// it ends the stream.
    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Failure = Never

        let buffer: PortMessageBuffer<Element>
        /// Ends the stream when the iterator is released; nil for a second iterator.
        private let lifetime: IterationLifetime<Element>?

        init(buffer: PortMessageBuffer<Element>, lifetime: IterationLifetime<Element>?) {
            self.buffer = buffer
            self.lifetime = lifetime
        }

        /// The next element, waiting for one if none is buffered; nil once the stream ended.
        public mutating func next() async -> Element? {
            guard lifetime != nil else { return nil }
            return await buffer.next(isolation: nil)
        }

        /// The same, staying on the caller's actor (no hop per element).
        public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? {
            guard lifetime != nil else { return nil }
            return await buffer.next(isolation: actor)
        }
    }
}

/// Held by a stream and its copies: its release ends a stream that was never iterated.
final class StreamHandle<Element: Sendable>: Sendable {
    let buffer: PortMessageBuffer<Element>
    init(buffer: PortMessageBuffer<Element>) { self.buffer = buffer }
    deinit { buffer.streamReleased() }
}

/// Held by the iterator: its release means the consumer stopped.
final class IterationLifetime<Element: Sendable>: Sendable {
    let buffer: PortMessageBuffer<Element>
    init(buffer: PortMessageBuffer<Element>) { self.buffer = buffer }
    deinit { buffer.consumerStopped() }
}

/// How many elements a ``PortStream`` keeps for its consumer, and what happens when it is
/// full; written `PortMessageStream.BufferingPolicy` at its uses. A value, so `Sendable`.
public struct PortStreamBufferingPolicy: Sendable, Hashable, CustomStringConvertible {
    /// The most elements buffered for the consumer.
    public let capacity: Int

    /// At most `capacity` elements (at least 1) wait for the consumer. When the buffer
    /// is full, the port is paused: its messages wait in its ZeroMQ queue, then its
    /// senders wait. It resumes once the consumer has taken the buffer down to
    /// `capacity / 2`. Nothing is dropped.
    public static func bounded(_ capacity: Int) -> PortStreamBufferingPolicy {
        precondition(capacity > 0, "a message stream needs room for at least one message")
        return PortStreamBufferingPolicy(capacity: capacity)
    }

    /// `bounded(256)`.
    public static let `default` = bounded(256)

    /// The buffer's count at or below which a paused port resumes.
    var resumeThreshold: Int { capacity / 2 }

    public var description: String { "bounded(\(capacity))" }
}

extension LocalPort {
    /// A stream of what the handler `makeHandler` makes hands its token, installed as the
    /// port's handler (see `PortStreamAttachment`). Any thread.
    func stream<Element>(_ policy: PortStreamBufferingPolicy,
                         handler makeHandler: @escaping (HandlerToken<Element>, LocalPort) -> PortHandler)
        -> PortStream<Element> {
        let buffer = PortMessageBuffer<Element>(policy: policy)
        let attachment = PortStreamAttachment(port: self, buffer: buffer, handler: makeHandler)
        buffer.attachment = attachment
        attachment.attach()
        return PortStream(buffer: buffer)
    }
}
