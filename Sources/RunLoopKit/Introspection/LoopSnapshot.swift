import RunLoopCore
import RunLoopSystem

/// What a run loop holds and has done, at one moment: its modes and, per mode, its
/// sources, ports, timers and observers, with the loop's counters (`CFRunLoop`'s
/// description, as a value).
///
/// Take one with `ThreadRunLoop.snapshot()` on the loop's thread; from another thread,
/// `try loop.performAndWait { loop.snapshot() }` takes it on the loop's thread at its next
/// pass in a common mode. The value is `Sendable` and may go anywhere afterwards.
public struct LoopSnapshot: Sendable, CustomStringConvertible {
    /// Whether this is the main thread's loop.
    public let isMainLoop: Bool
    /// When the snapshot was taken; timers' fire dates compare with it.
    public let takenAt: Deadline
    /// The modes of the runs in progress, outermost first (runs nest); empty when the loop
    /// is not running.
    public let runningModes: [LoopMode]
    /// The common modes, sorted by name.
    public let commonModes: [LoopMode]
    /// The items added to `.common`, which are also listed in each common mode.
    public let commonModeItems: ModeContents
    /// Every mode that has ever held an item, sorted by name (`.common` is not one).
    public let modes: [ModeContents]
    /// Perform requests waiting for a pass (queued from any thread), and delayed ones
    /// waiting for their time.
    public let pendingPerformRequests: Int
    public let counters: LoopCounters

    /// The mode of the innermost run, or nil when the loop is not running.
    public var currentMode: LoopMode? { runningModes.last }

    /// The contents of `mode` (for `.common`: the items added to `.common`), if it has any.
    public func contents(of mode: LoopMode) -> ModeContents? {
        mode == .common ? commonModeItems : modes.first { $0.mode == mode }
    }

    public var description: String { LoopSnapshotFormatter(self).text }
}

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
        /// message it delivers, until a receive (or `ZMQ_EVENTS`, after a send on the port's
        /// socket or after the one message of a run that returns after a handled source)
        /// finds it drained. The snapshot never asks
        /// the socket, so a message that arrived since the loop last polled is not seen here.
        public let isQueuedAsReady: Bool
        /// The port's `statistics` when the snapshot was taken.
        public let messagesReceived: Int
        public let messagesDropped: Int
        public let repliesFailed: Int
        /// Reply rights its deferring handler gave out and nobody has answered yet.
        public let rightsOutstanding: Int
        /// Requests given up by their requesters (or whose connection went) while outstanding.
        public let requestsCancelled: Int
    }
}

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
