import RunLoopCore

/// Handing work to a worker, with `LoopHandOff`'s verbs: `perform`, `performAndWait`,
/// `perform(after:)`, `cancelPerformRequests(tagged:)` and the async `submit`, adding only
/// that a stopping worker refuses work (`RunLoopError.stopped`). Any thread.
extension WorkerThread: LoopHandOff, LoopHandOffTarget {
    public typealias HandOffFailure = RunLoopError
    public typealias HandOffTarget = WorkerThread

    /// The worker's loop. Any thread.
    public var handOffLoop: ThreadRunLoop { loop }

    /// Queues `work` on the worker's loop; throws `.stopped` once the worker is stopping. Any thread.
    public func _enqueueHandOff(inModes modes: [LoopMode], tag: String?,
                               _ work: @escaping @Sendable () -> Void) throws(RunLoopError) -> PerformRequest {
        guard let request = control.enqueue(inModes: modes, tag: tag, work) else { throw .stopped }
        return request
    }

    /// Throws `.stopped` once the worker is stopping. Any thread.
    public func _checkTakesWork() throws(RunLoopError) {
        guard control.isRunning else { throw .stopped }
    }

    /// `.stopped` if a stop cancelled the request, `.cancelled` if `cancelPerformRequests` did. Any thread.
    public var _notRunError: RunLoopError { control.cancellationError }

    /// Cancels the worker's pending requests tagged `tag` (all of them with nil): queued,
    /// delayed, or delayed ones still being handed over. Callers waiting for them get
    /// `RunLoopError.cancelled`. Returns how many requests it cancelled. Any thread.
    @discardableResult
    public func cancelPerformRequests(tagged tag: String? = nil) -> Int {
        loop.cancelPerformRequests(tagged: tag)
    }
}
