import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
extension LoopSnapshot {
    /// A custom input source (`InputSource`) in a mode.
    public struct SourceInfo: Sendable, Identifiable {
        /// The source's identity: `ObjectIdentifier(source)`.
        public let id: ObjectIdentifier
        public let order: Int
        /// Signalled and not yet performed.
        public let isSignalled: Bool
        public let isValid: Bool
    }
}
