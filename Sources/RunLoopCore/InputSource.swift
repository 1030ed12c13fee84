import Synchronization

/// A custom input source (the guide's version-0 `CFRunLoopSource`): a client signals it
/// from any thread and wakes its loop; the loop then calls `perform` on its own thread,
/// once per pass however many times it was signalled.
///
/// `schedule` runs when the source is added to a mode of a loop, `cancel` when it is
/// removed from a mode or invalidated (once for each mode it was in). Sources perform in
/// ascending `order`. A source belongs to one run loop (in any number of its modes).
///
/// Thread safety: `signal()`, `invalidate()`, `isSignalled` and `isValid` from any thread;
/// the callbacks run on the loop's thread.
public final class InputSource: @unchecked Sendable {
    public typealias ModeCallback = (ThreadRunLoop, LoopMode) -> Void

    public let order: Int

    // Loop thread only; released on invalidation.
    private var scheduleCallback: ModeCallback?
    private var performCallback: (() -> Void)?
    private var cancelCallback: ModeCallback?

    private let signalled = Atomic<Bool>(false)
    /// Valid until invalidated; the loop it is scheduled on.
    let lifetime = LoopItemLifetime()

    public init(order: Int = 0, schedule: ModeCallback? = nil, cancel: ModeCallback? = nil,
                perform: @escaping () -> Void) {
        self.order = order
        self.scheduleCallback = schedule
        self.cancelCallback = cancel
        self.performCallback = perform
    }

    public var isValid: Bool { lifetime.isValid }

    /// Whether the source is signalled and has not performed since. Any thread.
    public var isSignalled: Bool { signalled.load(ordering: .acquiring) }

    /// Marks the source ready to perform (`CFRunLoopSourceSignal`). Any thread.
    ///
    /// Like Core Foundation, this does not wake a sleeping loop: follow it with the loop's
    /// `wakeUp()`, or use `signalAndWake()`.
    public func signal() {
        guard isValid else { return }
        signalled.store(true, ordering: .releasing)
    }

    /// Signals the source and wakes the loop it is on. Any thread.
    public func signalAndWake() {
        signal()
        lifetime.loop?.wakeUp()
    }

    /// Removes the source from every mode of its loop; `cancel` runs once per mode, on
    /// the loop's thread (at once when called there, else at the loop's next pass). Any thread.
    public func invalidate() {
        lifetime.invalidate(removing: { $0.removeSourceEverywhere(self) })
    }

    /// A relaxed look at the flag, for the pass's scan: `performIfSignalled` takes it. A
    /// signal stored as it is read is seen by the next pass, which its wake-up makes.
    @inline(__always)
    var mayBeSignalled: Bool { signalled.load(ordering: .relaxed) }

    /// Performs if signalled, clearing the signal first so that a signal raised during
    /// `perform` is seen next pass. Returns whether it performed.
    func performIfSignalled() -> Bool {
        guard isValid, signalled.exchange(false, ordering: .acquiringAndReleasing) else { return false }
        performCallback?()
        return true
    }

    func scheduled(on loop: ThreadRunLoop, mode: LoopMode) { scheduleCallback?(loop, mode) }
    func cancelled(on loop: ThreadRunLoop, mode: LoopMode) { cancelCallback?(loop, mode) }

    func releaseCallbacks() {
        scheduleCallback = nil
        performCallback = nil
        cancelCallback = nil
    }
}
