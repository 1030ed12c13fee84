import RunLoopCore

/// Pinning Swift concurrency to a run loop: the loop's executors.
extension ThreadRunLoop {
    /// The loop's serial executor for `modes`, created on first use and the same object on
    /// every call with the same modes (in any order). Its jobs run on this loop's thread in
    /// its passes in one of `modes`; see ``LoopExecutor``. Any thread: from another thread,
    /// a new executor joins the loop's modes at the loop's next pass, and jobs enqueued
    /// before then wait for it. On a loop whose thread has exited, its jobs run on a
    /// fallback serial queue.
    ///
    /// With `[.common]` (the default) jobs run in every common mode, but not in a private
    /// mode such as a blocking request's reply mode: an actor's jobs wait while one of its
    /// methods blocks in `sendRequest`.
    public func executor(modes: [LoopMode] = [.common]) -> LoopExecutor {
        let (executor, created) = LoopExecutorTable.shared.executor(for: self, modes: modes)
        if created { executor.jobs.schedule() }
        return executor
    }
}

extension WorkerThread {
    /// The serial executor of the worker's loop in its common modes: pin actors to the
    /// worker with it (`nonisolated var unownedExecutor` returning
    /// `worker.executor.asUnownedSerialExecutor()`), or prefer its `taskExecutor` for a task.
    /// Once the worker has stopped, its jobs run on a fallback serial queue (see
    /// ``LoopExecutor``). Any thread.
    ///
    /// Read on every hop to a pinned actor (Swift asks `unownedExecutor` each time), so it
    /// is a lock-free load once made: the loop's table of executors, which takes a lock,
    /// builds a set of modes and hashes it, is asked once per worker.
    public var executor: LoopExecutor {
        commonModesExecutor.load() ?? commonModesExecutor.storeIfNilThenLoad(loop.executor())
    }
}
