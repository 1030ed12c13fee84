import RunLoopCore

/// Handing work to a worker, with the run loop's verbs (see `ThreadRunLoop`'s): `perform`,
/// `performAndWait`, `perform(after:)`, `cancelPerformRequests(tagged:)` and the async
/// `submit`, adding only that a stopping worker refuses work (`RunLoopError.stopped`).
/// Any thread.
///
/// | Table 3-2 (`NSObject`)                                      | `WorkerThread`                       |
/// |-------------------------------------------------------------|--------------------------------------|
/// | `performSelector:onThread:withObject:waitUntilDone:NO modes:` | `perform(inModes:tag:_:)`          |
/// | `performSelector:onThread:withObject:waitUntilDone:YES modes:` | `performAndWait(inModes:_:)`      |
/// | `performSelector:withObject:afterDelay:inModes:`            | `perform(after:inModes:tag:_:)`      |
/// | `cancelPreviousPerformRequestsWithTarget:`                  | `cancelPerformRequests(tagged:)`     |
///
/// Work runs on the worker's thread in FIFO order, in the worker's next pass in one of
/// `modes` (the worker runs its default mode; another mode only while work on the worker
/// runs the loop in it). Once the worker is stopping, handing it work throws `RunLoopError.stopped`.
extension WorkerThread {
    /// Queues `work` and returns at once (`waitUntilDone:NO`); the returned request can be
    /// cancelled while pending. Throws `.stopped` if the worker no longer takes work. Any thread.
    @discardableResult
    public func perform(inModes modes: [LoopMode] = [.common], tag: String? = nil,
                        _ work: @escaping @Sendable () -> Void) throws(RunLoopError) -> PerformRequest {
        guard let request = control.enqueue(inModes: modes, tag: tag, work) else { throw .stopped }
        return request
    }

    /// Runs `work` on the worker and returns its result, rethrowing its error. On the
    /// worker's own thread it runs at once; from another thread it is queued and the
    /// caller blocks until it ran. Throws `RunLoopError.stopped` if the worker does not
    /// take it or stops (`.cancel`) before running it, `.cancelled` if it was cancelled. Any thread.
    public func performAndWait<T: Sendable>(inModes modes: [LoopMode] = [.common],
                                            _ work: @escaping @Sendable () throws -> T) throws -> T {
        if isCurrent { return try work() }
        let result = PendingResult<T>()
        guard let request = control.enqueue(inModes: modes, tag: nil, result.wrap(work)) else {
            throw RunLoopError.stopped
        }
        return try result.wait(for: request) { control.cancellationError }
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

    /// Runs `work` on the worker and returns its result (the async `performAndWait`): the calling
    /// task suspends meanwhile instead of blocking its thread. On the worker's own thread
    /// (from an actor pinned to the worker, say) it runs at once. It is a perform request:
    /// FIFO with the worker's other work.
    ///
    /// Throws the error `work` threw; `CancellationError` if the task is cancelled before
    /// the work started (the request is cancelled and never runs; work that started is
    /// awaited); `RunLoopError.stopped` if the worker does not take it or a stop cancels it;
    /// `RunLoopError.cancelled` if `cancelPerformRequests` cancelled it. Any thread.
    nonisolated(nonsending)
    public func submit<T: Sendable>(inModes modes: [LoopMode] = [.common],
                                    _ work: @escaping @Sendable () throws -> T) async throws -> T {
        if isCurrent {
            try Task.checkCancellation()
            return try work()
        }
        return try await PerformAwaiter.perform(work, post: { closure in
            guard let request = control.enqueue(inModes: modes, tag: nil, closure) else { throw RunLoopError.stopped }
            return request
        }) {
            control.cancellationError
        }
    }
}
