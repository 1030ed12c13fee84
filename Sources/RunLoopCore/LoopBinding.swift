import RunLoopSystem
/// The run loop an item (timer, source, observer) is scheduled on.
///
/// Bound once, on the loop's thread, and read from any thread (by `invalidate()`), so
/// the weak reference is behind a lock.
package final class LoopBinding: @unchecked Sendable {
    private let lock = Lock()
    private weak var boundLoop: ThreadRunLoop? // protected by `lock`
    private var isBound = false // protected by `lock`

    /// Binds to `loop`; returns false if already bound to another loop.
    func bind(to loop: ThreadRunLoop) -> Bool {
        lock.withLock {
            if isBound { return boundLoop === loop }
            boundLoop = loop
            isBound = true
            return true
        }
    }

    var loop: ThreadRunLoop? { lock.withLock { boundLoop } }
}
