import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
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
