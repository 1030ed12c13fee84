/// Perform requests: closures run on a loop's thread (the guide's Table 3-2). The verbs
/// (`perform`, `performAndWait`, `perform(after:)`, `submit`) are `LoopHandOff`'s: a loop
/// hands work to itself, and a request queued after its thread exited comes back `.cancelled`.
extension ThreadRunLoop: LoopHandOff, LoopHandOffTarget {
    public typealias HandOffFailure = Never
    public typealias HandOffTarget = ThreadRunLoop

    /// This loop. Any thread.
    public var handOffLoop: ThreadRunLoop { self }

    /// Queues `work` for this loop's next pass in one of `modes`, and wakes the loop. If the
    /// loop's thread has exited, the request comes back `.cancelled`. Any thread.
    public func _enqueueHandOff(inModes modes: [LoopMode], tag: String?,
                               _ work: @escaping @Sendable () -> Void) -> PerformRequest {
        let request = PerformRequest(modes: modes, tag: tag, work: work)
        let accepted = queueLock.withLock {
            guard lifecycle == .open else { return false }
            performQueue.append(request)
            queuedCount.add(1, ordering: .releasing)
            return true
        }
        if accepted { wakeUp() } else { request.cancel() }
        return request
    }

    /// A loop takes work until its thread exits (its requests then come back cancelled).
    public func _checkTakesWork() {}

    /// `.loopTerminated` once the loop's thread has exited, else `.cancelled`. Any thread.
    public var _notRunError: RunLoopError { isTornDown ? .loopTerminated : .cancelled }

    /// Runs `work` on this loop's thread after `delay`, in its next pass in one of `modes`,
    /// and returns the request: `perform(after:inModes:tag:_:)` for a caller on the loop's
    /// thread that keeps the request. Even a zero delay waits for the next pass. It is a
    /// one-shot timer, so it never counts as a handled source. Loop thread.
    @discardableResult
    public func schedulePerform(after delay: Duration, inModes modes: [LoopMode] = [.default], tag: String? = nil,
                                _ work: @escaping () -> Void) -> PerformRequest {
        assertOwnerThread()
        let request = PerformRequest(modes: modes, tag: tag, work: work)
        let timer = LoopTimer(after: delay) { [weak self, request] _ in
            _ = request.run()
            self?.queueLock.withLock { self?.delayedRequests.removeAll { $0 === request } }
        }
        request.timer = timer
        queueLock.withLock {
            // A cancelled delayed request never fires, so nothing else would drop it.
            delayedRequests.removeAll { $0.state == .cancelled }
            delayedRequests.append(request)
        }
        for mode in modes { add(timer, to: mode) }
        return request
    }

    /// Cancels this loop's perform requests that have not run yet, all of them or those
    /// with `tag` (`cancelPreviousPerformRequestsWithTarget:`): queued, delayed, or delayed
    /// ones still being handed over. Returns how many. Any thread.
    @discardableResult
    public func cancelPerformRequests(tagged tag: String? = nil) -> Int {
        delayedHandOver.cancel(tagged: tag) {
            let candidates = queueLock.withLock { performQueue + performBatches + delayedRequests }
            let cancelled = candidates.filter { tag == nil || $0.tag == tag }.reduce(0) { $0 + ($1.cancel() ? 1 : 0) }
            if cancelled > 0 { queueLock.withLock { delayedRequests.removeAll { $0.state == .cancelled } } }
            return cancelled
        }
    }

    // MARK: - Loop side

    /// Runs every request queued for `mode` so far, in FIFO order; requests for other
    /// modes stay queued. Returns whether any ran. Loop thread.
    @inline(__always)
    package func performQueuedRequests(in mode: LoopMode) -> Bool {
        guard queuedCount.load(ordering: .acquiring) > 0 else { return false }
        return performQueuedRequestsNow(in: mode)
    }

    private func performQueuedRequestsNow(in mode: LoopMode) -> Bool {
        // The batch is moved to the end of `performBatches` and run from there, so that
        // neither array gives its storage away: a queue's storage handed to the batch was
        // allocated by the next caller and freed on this thread, a free on another thread
        // than the malloc on every perform (docs/experiments/2026-12-07-perform-budget-shapes.md).
        let (first, count): (Int, Int) = queueLock.withLock {
            guard !performQueue.isEmpty else { return (0, 0) }
            // Once per batch, not per request; `.default` is always common (the set only grows).
            let modeIsCommon = mode == .default || commonModes.contains(mode)
            let before = performQueue.count
            let first = performBatches.count
            if before == 1, performQueue[0].mayRun(in: mode, modeIsCommon: modeIsCommon) {
                // The commonest case, one request: moved, without the generic bulk moves below.
                performBatches.append(performQueue.removeLast())
            } else if performQueue.allSatisfy({ $0.mayRun(in: mode, modeIsCommon: modeIsCommon) }) {
                // The usual case: every request queued may run now, so the whole queue is
                // the batch (cancelled ones among them do not run).
                performBatches.append(contentsOf: performQueue)
                performQueue.removeAll(keepingCapacity: before <= Self.keptQueueCapacity)
            } else {
                performQueue.removeAll { request in
                    if request.state == .cancelled { return true } // dropped, not run
                    guard request.isPending(for: mode, modeIsCommon: modeIsCommon) else { return false }
                    performBatches.append(request)
                    return true
                }
            }
            queuedCount.subtract(before - performQueue.count, ordering: .releasing)
            return (first, performBatches.count - first)
        }
        guard count > 0 else { return false }
        var ran = false
        // Only this thread changes `performBatches` (under queueLock, which other threads
        // take to read it), so it reads it without the lock. A nested run appends its batch
        // after this one and removes it before returning here.
        for index in first..<(first + count) {
            let request = performBatches[index]
            if request.run() { ran = true }
        }
        // Nested runs take and finish their batches within this one's: last in, first out.
        queueLock.withLock {
            if count == 1 { performBatches.removeLast() } else { performBatches.removeLast(count) }
        }
        return ran
    }

    /// Up to this many requests, a queue taken keeps its storage for the next ones.
    private static var keptQueueCapacity: Int { 64 }

    @inline(__always)
    func hasPendingPerformRequests(for mode: LoopMode) -> Bool {
        guard queuedCount.load(ordering: .acquiring) > 0 else { return false }
        return hasPendingPerformRequestsNow(for: mode)
    }

    private func hasPendingPerformRequestsNow(for mode: LoopMode) -> Bool {
        queueLock.withLock {
            let modeIsCommon = commonModes.contains(mode)
            return performQueue.contains { $0.isPending(for: mode, modeIsCommon: modeIsCommon) }
        }
    }
}
