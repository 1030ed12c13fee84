/// Perform requests: closures run on a loop's thread (the guide's Table 3-2).
extension ThreadRunLoop {
    /// Queues `work` to run on this loop's thread in its next pass in one of `modes`, and
    /// wakes the loop (`performSelector:onThread:withObject:waitUntilDone:NO modes:`).
    /// Requests run in FIFO order, all queued ones in each pass, and count as a handled
    /// source. If the loop's thread has exited, the request comes back `.cancelled`. Any thread.
    @discardableResult
    public func perform(inModes modes: [LoopMode] = [.common], tag: String? = nil,
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

    /// Runs `work` on this loop's thread and waits for its result
    /// (`performSelector:onThread:withObject:waitUntilDone:YES modes:`). On the loop's own
    /// thread it runs at once. Throws `RunLoopError.loopTerminated` if the thread has
    /// exited or exits before running it, `.cancelled` if the request was cancelled, or
    /// the error `work` threw. Any thread.
    public func performAndWait<T: Sendable>(inModes modes: [LoopMode] = [.common],
                                            _ work: @escaping @Sendable () throws -> T) throws -> T {
        if isOwnerThread { return try work() }
        // Not generic inside, so that a call instantiates no generic metadata at run time
        // (`Result<T, any Error>` and the like cost more than the rest of the hand-off).
        let outcome = PerformOutcome()
        let request = perform(inModes: modes) {
            do {
                outcome.value = try work()
            } catch {
                outcome.error = error
            }
        }
        switch request.waitUntilFinished() {
        case .done:
            if let error = outcome.error { throw error }
            return outcome.value as! T // work returned a T: the cast cannot fail
        default:
            throw queueLock.withLock { lifecycle == .tornDown } ? RunLoopError.loopTerminated : RunLoopError.cancelled
        }
    }

    /// Runs `work` on this loop's thread after `delay`, in its next pass in one of `modes`
    /// (`performSelector:withObject:afterDelay:inModes:`). Even a zero delay waits for the
    /// next pass. It is a one-shot timer, so it never counts as a handled source. Loop thread.
    @discardableResult
    public func perform(after delay: Duration, inModes modes: [LoopMode] = [.default], tag: String? = nil,
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
    /// with `tag` (`cancelPreviousPerformRequestsWithTarget:`). Returns how many. Any thread.
    @discardableResult
    public func cancelPerformRequests(tagged tag: String? = nil) -> Int {
        let candidates = queueLock.withLock { performQueue + performBatches + delayedRequests }
        let cancelled = candidates.filter { tag == nil || $0.tag == tag }.reduce(0) { $0 + ($1.cancel() ? 1 : 0) }
        if cancelled > 0 { queueLock.withLock { delayedRequests.removeAll { $0.state == .cancelled } } }
        return cancelled
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
        let batch: [PerformRequest] = queueLock.withLock {
            guard !performQueue.isEmpty else { return [] }
            var taken: [PerformRequest] = []
            let before = performQueue.count
            let modeIsCommon = commonModes.contains(mode) // once per batch, not per request
            performQueue.removeAll { request in
                if request.state == .cancelled { return true } // dropped, not run
                guard request.isPending(for: mode, modeIsCommon: modeIsCommon) else { return false }
                taken.append(request)
                return true
            }
            queuedCount.subtract(before - performQueue.count, ordering: .releasing)
            performBatches.append(contentsOf: taken)
            return taken
        }
        guard !batch.isEmpty else { return false }
        var ran = false
        for request in batch where request.run() { ran = true }
        // Nested runs take and finish their batches within this one's: last in, first out.
        queueLock.withLock { performBatches.removeLast(batch.count) }
        return ran
    }

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

/// What `performAndWait`'s work returned or threw. Written on the loop's thread before
/// the request is marked done, read by the waiter after it saw the request done: both
/// under the request's lock, which orders the write before the read.
private final class PerformOutcome: @unchecked Sendable {
    var value: Any?
    var error: (any Error)?
}

/// The async form of `performAndWait`: the caller's task suspends, no thread blocks.
extension ThreadRunLoop {
    /// Runs `work` on this loop's thread in its next pass in one of `modes`, and returns its
    /// result (the async `performAndWait`): the calling task suspends meanwhile instead of
    /// blocking its thread. On the loop's own thread (from an actor pinned to this loop, say)
    /// it runs at once. It is a perform request: FIFO with the loop's other perform requests.
    ///
    /// Throws the error `work` threw; `CancellationError` if the task is cancelled before
    /// the work started (the request is cancelled and never runs; work that started is
    /// awaited); `RunLoopError.loopTerminated` if the loop's thread has exited or exits
    /// first; `RunLoopError.cancelled` if `cancelPerformRequests` cancelled it. Any thread.
    ///
    /// (Not an overload of `perform(inModes:tag:_:)`: in async code the compiler would pick
    /// the async one for every fire-and-forget `perform` too.)
    nonisolated(nonsending)
    public func submit<T: Sendable>(inModes modes: [LoopMode] = [.common],
                                    _ work: @escaping @Sendable () throws -> T) async throws -> T {
        if isOwnerThread {
            try Task.checkCancellation()
            return try work()
        }
        return try await PerformAwaiter.perform(work, post: { perform(inModes: modes, $0) }) {
            isTornDown ? RunLoopError.loopTerminated : RunLoopError.cancelled
        }
    }
}
