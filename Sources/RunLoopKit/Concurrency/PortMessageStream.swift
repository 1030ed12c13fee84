import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
/// A port's messages as an `AsyncSequence`, for code that prefers `for await` to a handler:
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
/// takes it (or hands it over directly to a waiting consumer). Messages come in the order
/// the port received them.
///
/// **Back-pressure.** The buffer holds at most `bufferingPolicy.capacity` messages. When it
/// is full, the port leaves its loop's modes, so its messages wait in its ZeroMQ queue (up
/// to its `receiveHighWaterMark`), and beyond that its senders wait, and fail with
/// `PortError.sendTimedOut` at their deadlines. Once the consumer has taken the buffer
/// down to half, the port returns to its modes. Nothing is dropped. While it is out, an
/// inert input source holds its place in those modes, so that a run in them does not end
/// as `.finished` for want of sources; snapshots show that source instead of the port.
///
/// **End.** The consumer gets the messages buffered, then `nil`, once the port is
/// invalidated (its owner thread exiting included) or its handler is replaced (another
/// `messages()` call included). The stream ends for good, with the messages not yet taken
/// discarded, when the consumer stops: its iterator is released (`break` out of the loop,
/// say), the stream is released without being iterated, or the consuming task is
/// cancelled while it waits (`next()` then returns nil). The port's handler is then
/// removed, so later messages are dropped as for a port without a handler (counted as
/// `noHandler` and logged), and the port returns to its modes if it was out. A stream is
/// iterated once: a second iterator ends at once.
///
/// A request sent to the port gets an empty reply at once (the stream's handler returns
/// nil); use a handler for request/reply.
///
/// Thread safety and `Sendable`: the stream may be passed to any task and iterated from
/// any thread, by one consumer at a time (two concurrent `next()` calls trap). Its buffer
/// is behind a lock; the port is touched on its owner thread only.
public struct PortMessageStream: AsyncSequence, Sendable {
    public typealias Element = LoopMessage
    public typealias Failure = Never

    let buffer: PortMessageBuffer
    /// Ends the stream if it is released without being iterated.
    private let handle: StreamHandle

    init(buffer: PortMessageBuffer) {
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
        public typealias Element = LoopMessage
        public typealias Failure = Never

        let buffer: PortMessageBuffer
        /// Ends the stream when the iterator is released; nil for a second iterator.
        private let lifetime: IterationLifetime?

        init(buffer: PortMessageBuffer, lifetime: IterationLifetime?) {
            self.buffer = buffer
            self.lifetime = lifetime
        }

        /// The next message, waiting for one if none is buffered; nil once the stream ended.
        public mutating func next() async -> LoopMessage? {
            guard lifetime != nil else { return nil }
            return await buffer.next(isolation: nil)
        }

        /// The same, staying on the caller's actor (no hop per message).
        public mutating func next(isolation actor: isolated (any Actor)?) async -> LoopMessage? {
            guard lifetime != nil else { return nil }
            return await buffer.next(isolation: actor)
        }
    }
}

/// Held by a stream and its copies: its release ends a stream that was never iterated.
final class StreamHandle: Sendable {
    let buffer: PortMessageBuffer
    init(buffer: PortMessageBuffer) { self.buffer = buffer }
    deinit { buffer.streamReleased() }
}

/// Held by the iterator: its release means the consumer stopped.
final class IterationLifetime: Sendable {
    let buffer: PortMessageBuffer
    init(buffer: PortMessageBuffer) { self.buffer = buffer }
    deinit { buffer.consumerStopped() }
}
