/// A ``LoopExecutor``'s jobs queue as a `TaskExecutor`: tasks that prefer it run their
/// nonisolated code on the loop's thread, in the executor's modes and FIFO order.
///
///     let worker = try WorkerThread(name: "io")
///     Task(executorPreference: worker.executor.taskExecutor) {
///         // nonisolated async code, on the worker's thread between suspensions
///     }
///
/// A separate object from the serial executor because the runtime must know which role a
/// job was enqueued for: an actor's job runs isolated to the serial executor, a task's
/// nonisolated job on this one. Kept by its `LoopExecutor`; retained by the tasks that prefer it.
///
/// Thread safety: every member from any thread. `Sendable` for the same reasons as `LoopExecutor`.
public final class LoopTaskExecutor: TaskExecutor, @unchecked Sendable, CustomStringConvertible {
    let jobs: LoopJobQueue

    init(jobs: LoopJobQueue) { self.jobs = jobs }

    public func enqueue(_ job: consuming ExecutorJob) {
        jobs.enqueue(UnownedJob(job), on: .task(asUnownedTaskExecutor()))
    }

    public var description: String { "LoopTaskExecutor(modes: \(jobs.modes))" }
}
