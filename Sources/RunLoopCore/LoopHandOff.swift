import RunLoopSystem

/// What takes work from any thread to run on a run loop's thread: a loop (`ThreadRunLoop`),
/// a worker (`WorkerThread`), a pool of workers (`WorkerPool`); `MainLoop` forwards to
/// `ThreadRunLoop.main`. Table 3-2's verbs are written once, below, over one primitive:
/// `_nextHandOffTarget()`, the loop the next request goes to and how to queue on it.
///
/// | Table 3-2 (`NSObject`)                                         | verb                             |
/// |----------------------------------------------------------------|----------------------------------|
/// | `performSelector:onThread:withObject:waitUntilDone:NO modes:`  | `perform(inModes:tag:_:)`        |
/// | `performSelector:onThread:withObject:waitUntilDone:YES modes:` | `performAndWait(inModes:_:)`     |
/// | `performSelector:withObject:afterDelay:inModes:`               | `perform(after:inModes:tag:_:)`  |
/// | `cancelPreviousPerformRequestsWithTarget:`                     | `cancelPerformRequests(tagged:)` |
///
/// The members whose names begin with `_` are the implementer's hooks (as SwiftNIO marks
/// its own): a type that hands work over writes them; code that hands work over calls the
/// verbs, never the hooks.
///
/// Work runs on the target loop's thread in FIFO order, in its next pass in one of `modes`
/// (a worker runs its default mode; another mode only while work on it runs the loop in
/// it). Every verb may be called from any thread.
public protocol LoopHandOff: Sendable {
    /// What handing work over throws: `Never` for a loop, `RunLoopError.stopped` for a
    /// worker or pool that no longer takes work.
    associatedtype HandOffFailure: Error
    /// One loop's queue, chosen for one request.
    associatedtype HandOffTarget: LoopHandOffTarget where HandOffTarget.HandOffFailure == HandOffFailure

    /// The loop the next request goes to: a loop's own, a worker's, the pool member its
    /// policy picks. Throws if no work is taken any more.
    func _nextHandOffTarget() throws(HandOffFailure) -> HandOffTarget

    /// Cancels the pending requests tagged `tag` (all with nil): queued, delayed, or
    /// delayed ones still being handed over (`cancelPreviousPerformRequestsWithTarget:`).
    /// Callers waiting for them get `RunLoopError.cancelled`. Returns how many it cancelled.
    func cancelPerformRequests(tagged tag: String?) -> Int
}

/// One loop's queue, as a `LoopHandOff` supplies it for one request.
public protocol LoopHandOffTarget: Sendable {
    associatedtype HandOffFailure: Error
    /// The loop whose thread runs the work.
    var handOffLoop: ThreadRunLoop { get }
    /// Queues `work` on `handOffLoop` in `modes`, or throws if this target takes no work.
    func _enqueueHandOff(inModes modes: [LoopMode], tag: String?,
                        _ work: @escaping @Sendable () -> Void) throws(HandOffFailure) -> PerformRequest
    /// Throws if this target takes no work now (checked before scheduling on its own thread).
    func _checkTakesWork() throws(HandOffFailure)
    /// Why a request that never ran did not: read after it was found not done.
    var _notRunError: RunLoopError { get }
    /// `work` as this target counts it until it ran or was dropped (a pool's busy count).
    func _tracking(_ work: @escaping @Sendable () -> Void) -> @Sendable () -> Void
}

extension LoopHandOffTarget {
    public func _tracking(_ work: @escaping @Sendable () -> Void) -> @Sendable () -> Void { work }
}

/// A hand-off that is its own target (a loop, a worker: `HandOffTarget == Self`) hands
/// every request to itself, so it writes only what a target needs.
extension LoopHandOff where Self: LoopHandOffTarget, HandOffTarget == Self {
    /// Itself, for every request. Any thread.
    @inlinable // hot-path: inlinable-layers (docs/optimization-tips.md)
    public func _nextHandOffTarget() -> Self { self }
}

extension LoopHandOff {
    /// Queues `work` and returns at once (`waitUntilDone:NO`); the returned request can be
    /// cancelled while pending. Requests run in FIFO order, all queued ones in each pass,
    /// and count as a handled source. Throws `RunLoopError.stopped` if a worker or pool no
    /// longer takes work; a loop whose thread has exited returns the request `.cancelled`.
    /// Any thread.
    @discardableResult
    @inlinable // hot-path: inlinable-layers (docs/optimization-tips.md)
    public func perform(inModes modes: [LoopMode] = [.common], tag: String? = nil,
                        _ work: @escaping @Sendable () -> Void) throws(HandOffFailure) -> PerformRequest {
        let target = try _nextHandOffTarget()
        return try target._enqueueHandOff(inModes: modes, tag: tag, target._tracking(work))
    }

    /// Queues `work` with `value` moved to it, as `perform(inModes:tag:_:)` does: for a
    /// noncopyable value (a `ReplyRight`, say), which an escaping closure cannot capture and
    /// consume. `work` consumes the value on the target loop's thread; if the request never
    /// runs (cancelled, the loop gone), the value is dropped with it. Any thread.
    @discardableResult
    public func perform<Value: ~Copyable & Sendable>(moving value: consuming Value, inModes modes: [LoopMode] = [.common],
                                                     tag: String? = nil,
                                                     _ work: @escaping @Sendable (consuming Value) -> Void)
        throws(HandOffFailure) -> PerformRequest {
        let moved = MovedValue(value)
        return try perform(inModes: modes, tag: tag) {
            if let value = moved.take() { work(value) }
        }
    }

    /// Runs `work` on the target loop's thread and returns its result, rethrowing its error
    /// (`waitUntilDone:YES`). On that thread it runs at once; from another thread it is
    /// queued and the caller blocks until it ran. Throws `RunLoopError.loopTerminated` if a
    /// loop's thread has exited or exits before running it, `.stopped` if a worker or pool
    /// does not take it or stops (`.cancel`) before running it, `.cancelled` if it was
    /// cancelled. Any thread.
    @inlinable // hot-path: inlinable-layers (docs/optimization-tips.md)
    public func performAndWait<T: Sendable>(inModes modes: [LoopMode] = [.common],
                                            _ work: @escaping @Sendable () throws -> T) throws -> T {
        let target = try _nextHandOffTarget()
        if target.handOffLoop.isOwnerThread { return try work() }
        // What `work` returned or threw: written on the loop's thread before the request is
        // marked done, read here after it was found done (the request's semaphore orders the
        // write before the read). A captured variable, boxed with its type known where this
        // is specialized; a generic class holding it destroyed its `T?` field through
        // `Optional<T>`'s metadata, looked up on every call (docs/experiments/
        // 2026-12-07-perform-budget-shapes.md).
        nonisolated(unsafe) var outcome: (value: T?, error: (any Error)?) = (nil, nil)
        let request = try target._enqueueHandOff(inModes: modes, tag: nil, target._tracking {
            do { outcome.value = try work() } catch { outcome.error = error }
        })
        guard request.waitUntilFinished() == .done else { throw target._notRunError }
        if let error = outcome.error { throw error }
        return outcome.value.unsafelyUnwrapped
    }

    /// Runs `work` on the target loop's thread after `delay` (counted from this call), in its
    /// next pass in one of `modes` (`performSelector:withObject:afterDelay:inModes:`). Even a
    /// zero delay waits for the next pass. It is a one-shot timer, so it never counts as a
    /// handled source; cancelled by `cancelPerformRequests(tagged:)`, and by a worker's stop
    /// if not yet due. Throws `RunLoopError.stopped` if a worker or pool no longer takes
    /// work. Any thread.
    public func perform(after delay: Duration, inModes modes: [LoopMode] = [.default], tag: String? = nil,
                        _ work: @escaping @Sendable () -> Void) throws(HandOffFailure) {
        let target = try _nextHandOffTarget()
        let loop = target.handOffLoop
        if loop.isOwnerThread {
            try target._checkTakesWork()
            loop.delayedHandOver.schedule(on: loop, after: delay, inModes: modes, tag: tag, target._tracking(work))
        } else {
            let handOver = loop.delayedHandOver.handOver(to: loop, after: delay, inModes: modes, tag: tag,
                                                         target._tracking(work))
            _ = try target._enqueueHandOff(inModes: [.common], tag: tag, handOver)
        }
    }

    /// Runs `work` on the target loop's thread and returns its result (the async
    /// `performAndWait`): the calling task suspends meanwhile instead of blocking its thread.
    /// On that thread (from an actor pinned to the loop, say) it runs at once. It is a
    /// perform request: FIFO with the loop's other perform requests.
    ///
    /// Throws the error `work` threw; `CancellationError` if the task is cancelled before
    /// the work started (the request is cancelled and never runs; work that started is
    /// awaited); `RunLoopError.loopTerminated` if a loop's thread has exited or exits first,
    /// `.stopped` if a worker or pool does not take it or a stop cancels it; `.cancelled`
    /// if `cancelPerformRequests` cancelled it. Any thread.
    ///
    /// (Not an overload of `perform(inModes:tag:_:)`: in async code the compiler would pick
    /// the async one for every fire-and-forget `perform` too.)
    nonisolated(nonsending)
    public func submit<T: Sendable>(inModes modes: [LoopMode] = [.common],
                                    _ work: @escaping @Sendable () throws -> T) async throws -> T {
        let target = try _nextHandOffTarget()
        if target.handOffLoop.isOwnerThread {
            try Task.checkCancellation()
            return try work()
        }
        return try await PerformAwaiter.perform(work, post: { closure in
            try target._enqueueHandOff(inModes: modes, tag: nil, target._tracking(closure))
        }) {
            target._notRunError
        }
    }
}

/// A noncopyable value on its way into an escaping closure: taken out once, by the closure;
/// dropped with the box if the closure never runs.
package final class MovedValue<Value: ~Copyable & Sendable>: @unchecked Sendable {
    private let lock = Lock()
    private var value: Value? // protected by lock

    package init(_ value: consuming Value) { self.value = consume value }

    /// The value, the first time; nil after.
    package func take() -> Value? {
        lock.lock()
        defer { lock.unlock() }
        return value.take()
    }
}
