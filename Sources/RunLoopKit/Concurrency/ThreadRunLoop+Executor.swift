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
