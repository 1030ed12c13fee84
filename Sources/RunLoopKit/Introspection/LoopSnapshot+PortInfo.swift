extension LoopSnapshot {
    /// A port-based source (`LocalPort`) in a mode.
    public struct PortInfo: Sendable, Identifiable {
        /// The port's identity: `ObjectIdentifier(port)`.
        public let id: ObjectIdentifier
        /// The address other threads and processes send to (`LocalPort.remote`).
        public let address: PortAddress
        /// The name the port is registered under, if any.
        public let name: String?
        /// Whether a message waits to be delivered (it will be, at the loop's next pass in
        /// one of the port's modes).
        public let hasPendingMessage: Bool
        /// The port's `statistics` when the snapshot was taken.
        public let messagesReceived: Int
        public let messagesDropped: Int
        public let repliesFailed: Int
    }
}
