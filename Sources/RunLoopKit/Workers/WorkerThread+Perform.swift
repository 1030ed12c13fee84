import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
/// Handing work to a worker: the guide's Table 3-2 for a worker thread, a result-returning
/// `sync`, a fire-and-forget `async`, delayed performs and cancellation. Any thread.
///
/// | Table 3-2 (`NSObject`)                                  | `WorkerThread`                             |
/// |---------------------------------------------------------|--------------------------------------------|
/// | `performSelector:onThread:withObject:waitUntilDone:modes:` | `perform(inModes:waitUntilDone:_:)`      |
/// | `performSelector:withObject:afterDelay:inModes:`        | `perform(after:inModes:tag:_:)`            |
/// | `cancelPreviousPerformRequestsWithTarget:`              | `cancelPerformRequests(tagged:)`           |
///
/// Work runs on the worker's thread in FIFO order, in the worker's next pass in one of
/// `modes` (the worker runs its default mode; another mode only while work on the worker
/// runs the loop in it). Once the worker is stopping, handing it work throws `RunLoopError.stopped`.
extension WorkerThread {
    /// Queues `work` and returns at once (`waitUntilDone:NO`); the returned request can be
    /// cancelled while pending. Throws `.stopped` if the worker no longer takes work. Any thread.
    @discardableResult
    public func async(inModes modes: [LoopMode] = [.common], tag: String? = nil,
                      _ work: @escaping @Sendable () -> Void) throws(RunLoopError) -> PerformRequest {
        guard let request = control.enqueue(inModes: modes, tag: tag, work) else { throw .stopped }
        return request
    }

    /// Runs `work` on the worker and returns its result, rethrowing its error. On the
    /// worker's own thread it runs at once; from another thread it is queued and the
    /// caller blocks until it ran. Throws `RunLoopError.stopped` if the worker does not
    /// take it or stops (`.cancel`) before running it, `.cancelled` if it was cancelled. Any thread.
    public func sync<T: Sendable>(inModes modes: [LoopMode] = [.common],
                                  _ work: @escaping @Sendable () throws -> T) throws -> T {
        if isCurrent { return try work() }
        let result = PendingResult<T>()
        guard let request = control.enqueue(inModes: modes, tag: nil, result.wrap(work)) else {
            throw RunLoopError.stopped
        }
        return try result.wait(for: request) { control.cancellationError }
    }

    /// Table 3-2's `performSelector:onThread:withObject:waitUntilDone:modes:`. With
    /// `waitUntilDone`, the caller blocks until `work` ran (at once on the worker's own
    /// thread), and it throws like `sync`; without, it is `async`. Any thread.
    @discardableResult
    public func perform(inModes modes: [LoopMode] = [.common], tag: String? = nil, waitUntilDone: Bool,
                        _ work: @escaping @Sendable () -> Void) throws(RunLoopError) -> PerformRequest {
        guard waitUntilDone else { return try async(inModes: modes, tag: tag, work) }
        if isCurrent {
            let request = PerformRequest(modes: modes, tag: tag, work: work)
            _ = request.run()
            return request
        }
        let request = try async(inModes: modes, tag: tag, work)
        try request.waitUntilDone { control.cancellationError }
        return request
    }

    /// Runs `work` on the worker after `delay` (counted from this call), in its next pass in
    /// one of `modes` (`performSelector:withObject:afterDelay:inModes:`); a one-shot timer on
    /// the worker's loop, cancelled by `cancelPerformRequests(tagged:)`, and by a stop if not
    /// yet due. Throws `.stopped` if the worker no longer takes work. Any thread.
    public func perform(after delay: Duration, inModes modes: [LoopMode] = [.default], tag: String? = nil,
                        _ work: @escaping @Sendable () -> Void) throws(RunLoopError) {
        if isCurrent {
            guard control.isRunning else { throw .stopped }
            _ = delayedPerforms.schedule(after: delay, inModes: modes, tag: tag, work)
            return
        }
        let handOver = delayedPerforms.handOver(after: delay, inModes: modes, tag: tag, work)
        guard control.enqueue(inModes: [.common], tag: tag, handOver) != nil else { throw .stopped }
    }

    /// Cancels the worker's pending requests tagged `tag` (all of them with nil): queued,
    /// delayed, or delayed ones still being handed over. Callers waiting for them get
    /// `RunLoopError.cancelled`. Returns how many requests it cancelled. Any thread.
    @discardableResult
    public func cancelPerformRequests(tagged tag: String? = nil) -> Int {
        delayedPerforms.cancel(tagged: tag)
    }
}
