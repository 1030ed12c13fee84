import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
extension LoopSnapshot {
    /// A timer (`LoopTimer`) in a mode.
    public struct TimerInfo: Sendable, Identifiable {
        /// The timer's identity: `ObjectIdentifier(timer)`.
        public let id: ObjectIdentifier
        public let fireDate: Deadline
        /// How long after the snapshot the timer is due: negative when it is overdue.
        public let fireDelay: Duration
        /// The time between fires; nil for a one-shot timer.
        public let interval: Duration?
        public let tolerance: Duration
        public let isValid: Bool
    }
}
