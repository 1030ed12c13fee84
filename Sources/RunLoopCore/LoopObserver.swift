import Synchronization

/// A run-loop observer (`CFRunLoopObserver`): told of the activities it asked for, in
/// `order` among the mode's observers, on the loop's thread.
///
/// A one-shot observer (`repeats: false`) is removed after its first callback.
///
/// Thread safety: `invalidate()` and `isValid` from any thread; it is called on its loop's thread.
public final class LoopObserver: @unchecked Sendable {
    public let activities: LoopActivity
    public let repeats: Bool
    /// Observers of a mode are told in ascending order (ties in the order they were added).
    public let order: Int

    private var callback: ((LoopObserver, LoopActivity) -> Void)? // loop thread
    /// True during the callback, so that a nested run does not call it again. Loop thread.
    private var isNotifying = false
    /// Valid until invalidated; the loop it is scheduled on.
    let lifetime = LoopItemLifetime()

    public init(activities: LoopActivity, repeats: Bool = true, order: Int = 0,
                _ callback: @escaping (LoopObserver, LoopActivity) -> Void) {
        self.activities = activities
        self.repeats = repeats
        self.order = order
        self.callback = callback
    }

    public var isValid: Bool { lifetime.isValid }

    /// Removes the observer from every mode of its loop. Any thread.
    public func invalidate() {
        lifetime.invalidate(removing: { $0.removeObserverEverywhere(self) })
    }

    /// Tells the observer of `activity`; a one-shot observer invalidates itself after.
    func notify(_ activity: LoopActivity) {
        guard !isNotifying else { return }
        isNotifying = true
        callback?(self, activity)
        isNotifying = false
        if !repeats { invalidate() }
    }

    func releaseCallback() { callback = nil }
}
