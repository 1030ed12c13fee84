import RunLoopSystem
import Synchronization

/// A timer source (`CFRunLoopTimer` / `NSTimer`): fires its closure on a run loop's thread
/// at its fire date, and, when repeating, on a grid of `interval` from its first fire date.
///
/// - A timer never fires early, never fires when added, only fires while its loop runs in
///   one of its modes, and when the loop is free fires at most `tolerance` late.
/// - A repeating timer that is late by more than an interval fires once for the missed
///   period and continues on its original grid.
/// - A timer belongs to one run loop (in any number of its modes).
///
/// Thread safety: `invalidate()` and `isValid` from any thread; the rest on the thread of
/// the loop the timer is scheduled on (or any thread before it is scheduled).
public final class LoopTimer: @unchecked Sendable {
    /// The time between fires of a repeating timer; `nil` for a one-shot timer.
    public let interval: Duration?

    /// How late the timer may fire, so that the loop can fire timers together in one
    /// wake-up. Loop thread.
    public var tolerance: Duration

    /// When the timer fires next. Setting it from a callback reschedules the timer,
    /// itself included. Loop thread.
    public var fireDate: Deadline

    /// The closure, released on invalidation so that captured objects go. Loop thread.
    private var body: ((LoopTimer) -> Void)?
    /// True during the callback, so that a nested run does not fire the timer again. Loop thread.
    private(set) var isFiring = false
    /// Valid until invalidated; the loop it is scheduled on.
    let lifetime = LoopItemLifetime()

    /// A timer first firing at `fireDate`, then every `interval` if one is given.
    public init(fireAt fireDate: Deadline, interval: Duration? = nil, tolerance: Duration = .zero,
                _ body: @escaping (LoopTimer) -> Void) {
        precondition(interval.map { $0 > .zero } ?? true, "a repeating timer needs a positive interval")
        self.fireDate = fireDate
        self.interval = interval
        self.tolerance = tolerance
        self.body = body
    }

    /// A timer first firing `delay` from now, then every `interval` if one is given.
    public convenience init(after delay: Duration, repeating interval: Duration? = nil,
                            tolerance: Duration = .zero, _ body: @escaping (LoopTimer) -> Void) {
        self.init(fireAt: .after(delay), interval: interval, tolerance: tolerance, body)
    }

    /// Whether the timer can still fire. Any thread.
    public var isValid: Bool { lifetime.isValid }

    /// Stops the timer for good and removes it from its loop. Any thread.
    public func invalidate() {
        lifetime.invalidate(removing: { $0.removeTimerEverywhere(self) })
    }

    /// The latest time the loop may fire this timer.
    var latestFireDate: Deadline { fireDate + tolerance }

    /// Fires the timer and moves it to its next grid point (or invalidates a one-shot
    /// timer), unless the callback rescheduled or invalidated it. Loop thread.
    func fire() {
        guard !isFiring else { return }
        let scheduled = fireDate
        isFiring = true
        body?(self)
        isFiring = false
        guard isValid, fireDate == scheduled else { return }
        guard let interval else {
            invalidate()
            return
        }
        fireDate = LoopTimer.nextGridPoint(after: .now(), from: scheduled, every: interval)
    }

    /// The first point of the grid `origin + k·interval` (k ≥ 1) that is after `now`: a
    /// late timer fires once for all the points it missed.
    static func nextGridPoint(after now: Deadline, from origin: Deadline, every interval: Duration) -> Deadline {
        let step = UInt64(max(interval.totalNanoseconds, 1))
        guard now >= origin else { return origin + interval }
        let missed = (now.rawValue - origin.rawValue) / step + 1
        let (offset, overflow) = missed.multipliedReportingOverflow(by: step)
        return overflow ? .distantFuture : Deadline(rawValue: origin.rawValue &+ offset)
    }

    /// Drops the closure once the timer is gone from its loop.
    func releaseBody() { body = nil }
}
