import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
extension LoopSnapshot {
    /// A port-based source (`LocalPort`) in a mode.
    public struct PortInfo: Sendable, Identifiable {
        /// The port's identity: `ObjectIdentifier(port)`.
        public let id: ObjectIdentifier
        /// The address other threads and processes send to (`LocalPort.remote`).
        public let address: PortAddress
        /// The name the port is registered under, if any.
        public let name: String?
        /// Whether the loop has the port queued as ready: at its next pass in one of the
        /// port's modes (unless the port is paused) it will try to receive from it. A port
        /// is queued when it is added or resumed, when its descriptor fires, and after each
        /// message it delivers, until a receive finds it drained. The snapshot never asks
        /// the socket, so a message that arrived since the loop last polled is not seen here.
        public let isQueuedAsReady: Bool
        /// The port's `statistics` when the snapshot was taken.
        public let messagesReceived: Int
        public let messagesDropped: Int
        public let repliesFailed: Int
    }
}
