/// Pinning Swift concurrency to a worker: its loop's executor.
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
