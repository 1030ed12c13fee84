import RunLoopCore

/// A serial executor whose jobs run on a run loop's thread, in the modes it was made for:
/// pin an actor to a loop with it, and the actor's methods run on that thread, interleaved
/// with the loop's timers, sources and port messages.
///
///     actor Session {
///         let worker: WorkerThread
///         init(worker: WorkerThread) { self.worker = worker }
///         nonisolated var unownedExecutor: UnownedSerialExecutor {
///             worker.executor.asUnownedSerialExecutor()
///         }
///         func poll() { precondition(worker.isCurrent) /* on the worker's thread */ }
///     }
///
/// Get one with ``RunLoopCore/ThreadRunLoop/executor(modes:)`` or ``WorkerThread/executor``: a loop has
/// one executor per set of modes, so every actor pinned to a worker shares one executor
/// and calls between them need no hop.
///
/// **Scheduling.** Jobs go into a queue of their own, drained by an input source of the
/// loop in step 4 of each pass in one of `modes`. A job enqueued from any thread wakes the
/// loop at once. Jobs run one at a time, in the order they were enqueued (priorities do
/// not reorder them); the jobs enqueued while a batch runs wait for the next pass, so the
/// loop's timers and ports get their turn between (a task that keeps yielding cannot
/// starve them). A job never runs inside another job of the same executor: a nested run
/// started by a job (a blocking `sendRequest`, say) leaves the executor's jobs queued.
///
/// **Against perform requests.** Each queue keeps its own FIFO order; between the two,
/// the pass decides. In step 4 the loop runs the perform requests queued for the mode,
/// then its input sources in `order`, this executor's among them, which runs the jobs
/// queued by then. So what is queued before a pass reaches step 4 runs in that pass,
/// perform requests first; a job enqueued while those requests run still runs in that
/// pass, and a request queued while the jobs run waits for the next one. A job and a
/// request queued one after the other may therefore run in either order: for a strict
/// order, run both as jobs (on the actor) or await the first.
///
/// **Isolation.** `checkIsolated()` and `isIsolatingCurrentContext()` answer whether the
/// caller is on the loop's thread, so `assumeIsolated` works in the loop's own callbacks
/// (a timer, a port handler) as well as in jobs; two executors of one loop are the same
/// exclusive execution context. As with the main actor and the main run loop, a callback
/// run by a nested run inside an actor's method re-enters the actor's state.
///
/// **When the loop's thread exits.** The executor cannot refuse a job, and a job dropped
/// would leave its task suspended forever. So when the loop is torn down, the jobs still
/// queued and every later one run on a private serial dispatch queue: one at a time and in
/// order, so the actor's state stays safe and its tasks can finish, but no longer on the
/// loop's thread (`isOwnerThread` is false there, and `assumeIsolated` outside a job
/// traps). Tasks in flight when a worker stops are common: a task the teardown wakes (a
/// message stream's consumer seeing its port closed) may resume through the global
/// executor and hop back to its actor only after the thread has gone; trapping there would
/// make stopping a worker crash at random. `loopThreadHasExited` tells when this happened.
/// Stop a worker once the work pinned to it is done.
///
/// **Lifetime.** `UnownedSerialExecutor` does not retain the executor. The loop's table of
/// executors keeps each one while the loop object lives (a `WorkerThread` keeps its loop),
/// so the pattern above is safe; an actor pinned to a loop it does not keep should store
/// its executor in a `let`.
///
/// Thread safety: every member from any thread. `Sendable`: the queue is behind a lock, the
/// loop is reached only through its thread-safe members, the rest is immutable.
public final class LoopExecutor: SerialExecutor, @unchecked Sendable, CustomStringConvertible {
    let jobs: LoopJobQueue

    /// The same jobs queue as a `TaskExecutor`, for `Task(executorPreference:)` and
    /// `withTaskExecutorPreference`: nonisolated async code then runs on the loop's thread
    /// too, in the same FIFO order as the actor jobs of this executor.
    public let taskExecutor: LoopTaskExecutor

    init(loop: ThreadRunLoop, modes: [LoopMode]) {
        jobs = LoopJobQueue(loop: loop, modes: modes)
        taskExecutor = LoopTaskExecutor(jobs: jobs)
    }

    /// The modes in which the loop runs this executor's jobs.
    public var modes: [LoopMode] { jobs.modes }

    /// The loop whose thread runs the jobs; nil once that loop is gone.
    public var loop: ThreadRunLoop? { jobs.loop }

    /// Whether the loop's thread has exited, so that jobs now run on the fallback serial
    /// queue (see the type's notes).
    public var loopThreadHasExited: Bool { jobs.isOrphaned }

    public func enqueue(_ job: consuming ExecutorJob) {
        jobs.enqueue(UnownedJob(job), on: .serial(asUnownedSerialExecutor()))
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        // Complex equality: the runtime asks `isSameExclusiveExecutionContext` before
        // deciding that two executors of one loop are different contexts.
        UnownedSerialExecutor(complexEquality: self)
    }

    /// Two executors of one loop share its thread, so their jobs never run at the same time.
    public func isSameExclusiveExecutionContext(other: LoopExecutor) -> Bool {
        guard let loop = jobs.loop else { return false }
        return loop === other.jobs.loop
    }

    /// Traps unless called on the loop's thread (what `assumeIsolated` checks outside a job).
    public func checkIsolated() {
        precondition(jobs.loop?.isOwnerThread == true,
                     "code isolated to \(self) ran off its run loop's thread")
    }

    /// Whether the caller is on the loop's thread.
    public func isIsolatingCurrentContext() -> Bool? {
        jobs.loop?.isOwnerThread ?? false
    }

    public var description: String { "LoopExecutor(modes: \(jobs.modes))" }
}
