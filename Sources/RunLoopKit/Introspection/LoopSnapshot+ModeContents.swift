import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
extension LoopSnapshot {
    /// The items of one mode, each kind in the order the loop services it: sources and
    /// observers by ascending `order`, ports and timers as they were added.
    public struct ModeContents: Sendable {
        public let mode: LoopMode
        /// Whether the mode is in the loop's common set (its items include `.common`'s).
        public let isCommon: Bool
        public let sources: [SourceInfo]
        public let ports: [PortInfo]
        public let timers: [TimerInfo]
        public let observers: [ObserverInfo]

        /// Whether the mode holds nothing at all.
        public var isEmpty: Bool { sources.isEmpty && ports.isEmpty && timers.isEmpty && observers.isEmpty }
    }
}
