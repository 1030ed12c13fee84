import RunLoopSystem
import Synchronization

/// The lifetime a loop's input sources, timers and observers share (one copy, not one per
/// kind): valid until invalidated, once, from any thread; scheduled on at most one loop;
/// and, once invalidated, removed from that loop on the loop's own thread.
///
/// Descriptor sources use its binding and keep a lifecycle of their own, which also closes
/// an owned descriptor; ports have `LocalPort.Lifecycle`.
///
/// Thread safety: any thread. The loop is bound once, on its own thread, and read from
/// any thread (by `invalidate`), so the weak reference is behind a lock.
package final class LoopItemLifetime: @unchecked Sendable {
    private let valid = Atomic<Bool>(true)
    private let lock = Lock()
    private weak var boundLoop: ThreadRunLoop? // protected by `lock`
    private var isBound = false // protected by `lock`

    /// Whether the item has not been invalidated. Any thread.
    var isValid: Bool { valid.load(ordering: .acquiring) }

    /// Binds to `loop`; returns false if already bound to another loop.
    func bind(to loop: ThreadRunLoop) -> Bool {
        lock.withLock {
            if isBound { return boundLoop === loop }
            boundLoop = loop
            isBound = true
            return true
        }
    }

    /// The loop the item is scheduled on, if it still exists.
    var loop: ThreadRunLoop? { lock.withLock { boundLoop } }

    /// Invalidates the item: the first call marks it invalid and has `remove` run on its
    /// loop's thread (at once when called there, else at the loop's next pass); later
    /// calls do nothing. Any thread.
    func invalidate(removing remove: @escaping ThreadRunLoop.ControlAction) {
        guard valid.exchange(false, ordering: .acquiringAndReleasing) else { return }
        loop?.runOnOwnerThread(remove)
    }
}
