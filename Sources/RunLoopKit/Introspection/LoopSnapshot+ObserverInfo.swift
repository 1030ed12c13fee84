import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
extension LoopSnapshot {
    /// An observer (`LoopObserver`) in a mode.
    public struct ObserverInfo: Sendable, Identifiable {
        /// The observer's identity: `ObjectIdentifier(observer)`.
        public let id: ObjectIdentifier
        public let activities: LoopActivity
        public let order: Int
        /// False for a one-shot observer, removed after its first callback.
        public let repeats: Bool
        public let isValid: Bool
    }
}
