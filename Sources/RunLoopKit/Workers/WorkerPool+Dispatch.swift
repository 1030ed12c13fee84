import RunLoopCore

/// Handing work to a pool, with `LoopHandOff`'s verbs: each call goes to one worker, chosen
/// by the pool's policy, and behaves as the same call on that `WorkerThread`, counted as
/// that worker's load until it ran. Throws `RunLoopError.stopped` once the pool is stopping.
/// Any thread.
extension WorkerPool: LoopHandOff {
    public typealias HandOffFailure = RunLoopError
    public typealias HandOffTarget = _Assignment

    /// One request's worker, chosen by the pool's policy, and its share of that worker's load.
    public struct _Assignment: LoopHandOffTarget {
        public typealias HandOffFailure = RunLoopError
        let token: BusyToken

        public var handOffLoop: ThreadRunLoop { token.member.worker.loop }

        public func _enqueueHandOff(inModes modes: [LoopMode], tag: String?,
                                   _ work: @escaping @Sendable () -> Void) throws(RunLoopError) -> PerformRequest {
            try token.member.worker._enqueueHandOff(inModes: modes, tag: tag, work)
        }

        public func _checkTakesWork() throws(RunLoopError) { try token.member.worker._checkTakesWork() }

        public var _notRunError: RunLoopError { token.member.worker._notRunError }

        /// `work`, ending the worker's count of it when it ran (or, cancelled, when it is dropped).
        public func _tracking(_ work: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
            { [token] in
                defer { token.end() }
                work()
            }
        }
    }

    /// The worker the pool's policy picks, counted busy with the request. Throws `.stopped`
    /// once the pool is stopping. Any thread.
    public func _nextHandOffTarget() throws(RunLoopError) -> _Assignment {
        guard isRunning else { throw .stopped }
        return _Assignment(token: nextMember().begin())
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
