import RunLoopCore

/// Handing work to a pool, with the run loop's verbs: each call goes to one worker, chosen
/// by the pool's policy, and behaves as the same call on that `WorkerThread`. Any thread.
extension WorkerPool {
    /// Queues `work` on a worker and returns at once. Throws `.stopped` once the pool is stopping.
    @discardableResult
    public func perform(inModes modes: [LoopMode] = [.common], tag: String? = nil,
                        _ work: @escaping @Sendable () -> Void) throws(RunLoopError) -> PerformRequest {
        guard isRunning else { throw .stopped }
        let token = nextMember().begin()
        return try token.member.worker.perform(inModes: modes, tag: tag) {
            defer { token.end() }
            work()
        }
    }

    /// Runs `work` on a worker and returns its result, rethrowing its error; the caller
    /// blocks until it ran. Throws `RunLoopError.stopped` once the pool is stopping.
    public func performAndWait<T: Sendable>(inModes modes: [LoopMode] = [.common],
                                            _ work: @escaping @Sendable () throws -> T) throws -> T {
        guard isRunning else { throw RunLoopError.stopped }
        let token = nextMember().begin()
        return try token.member.worker.performAndWait(inModes: modes) {
            defer { token.end() }
            return try work()
        }
    }

    /// Runs `work` on a worker after `delay` (counted from this call), as the worker's
    /// `perform(after:inModes:tag:_:)` does. Throws `.stopped` once the pool is stopping.
    public func perform(after delay: Duration, inModes modes: [LoopMode] = [.default], tag: String? = nil,
                        _ work: @escaping @Sendable () -> Void) throws(RunLoopError) {
        guard isRunning else { throw .stopped }
        let token = nextMember().begin()
        do {
            try token.member.worker.perform(after: delay, inModes: modes, tag: tag) {
                defer { token.end() }
                work()
            }
        } catch {
            token.end()
            throw error
        }
    }

    /// Runs `work` on a worker and returns its result, the calling task suspending meanwhile
    /// (the worker's `submit`). Throws `RunLoopError.stopped` once the pool is stopping.
    nonisolated(nonsending)
    public func submit<T: Sendable>(inModes modes: [LoopMode] = [.common],
                                    _ work: @escaping @Sendable () throws -> T) async throws -> T {
        guard isRunning else { throw RunLoopError.stopped }
        let token = nextMember().begin()
        defer { token.end() }
        return try await token.member.worker.submit(inModes: modes, work)
    }

    /// Cancels the pending requests tagged `tag` (all with nil) on every worker; returns how many.
    @discardableResult
    public func cancelPerformRequests(tagged tag: String? = nil) -> Int {
        workers.reduce(0) { $0 + $1.cancelPerformRequests(tagged: tag) }
    }

    /// The worker the next request goes to.
    func nextMember() -> PoolMember {
        let start = Int(turn.wrappingAdd(1, ordering: .relaxed).oldValue % UInt(members.count))
        switch policy {
        case .roundRobin:
            return members[start]
        case .leastBusy:
            var best = members[start]
            var bestLoad = best.outstanding.load(ordering: .relaxed)
            for offset in 1..<members.count where bestLoad > 0 {
                let candidate = members[(start + offset) % members.count]
                let load = candidate.outstanding.load(ordering: .relaxed)
                if load < bestLoad {
                    best = candidate
                    bestLoad = load
                }
            }
            return best
        }
    }
}
