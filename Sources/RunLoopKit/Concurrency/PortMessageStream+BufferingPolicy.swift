import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
extension PortMessageStream {
    /// How many messages a stream keeps for its consumer, and what happens when it is full.
    /// A value, so `Sendable`.
    public struct BufferingPolicy: Sendable, Hashable, CustomStringConvertible {
        /// The most messages buffered for the consumer.
        public let capacity: Int

        /// At most `capacity` messages (at least 1) wait for the consumer. When the buffer
        /// is full, the port leaves its loop's modes: its messages wait in its ZeroMQ queue,
        /// then its senders wait. It returns to its modes once the consumer has taken the
        /// buffer down to `capacity / 2`. Nothing is dropped.
        public static func bounded(_ capacity: Int) -> BufferingPolicy {
            precondition(capacity > 0, "a message stream needs room for at least one message")
            return BufferingPolicy(capacity: capacity)
        }

        /// `bounded(256)`.
        public static let `default` = bounded(256)

        /// The buffer's count at or below which a paused port returns to its modes.
        var resumeThreshold: Int { capacity / 2 }

        public var description: String { "bounded(\(capacity))" }
    }
}
