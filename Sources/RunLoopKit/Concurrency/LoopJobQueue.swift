import RunLoopCore
import RunLoopSystem
import Dispatch

/// The jobs of a `LoopExecutor` (and of its `LoopTaskExecutor`): a lock-protected FIFO
/// queue drained by an input source of the loop, on the loop's thread.
///
/// Enqueueing appends under the lock; the enqueue that finds the queue empty signals the
/// source and wakes the loop (later ones ride on that signal). In each pass in one of the
/// executor's modes, the source takes the whole queue at once and runs it, in FIFO order.
/// Jobs enqueued meanwhile wait for the next pass, so a task that keeps yielding cannot
/// starve the loop's timers and ports. Jobs never run inside another job of the same
/// queue: a nested run started by a job leaves the queue alone (it would break the
/// actor's exclusivity) and the queue gets its turn once the job returns.
///
/// When the loop's thread exits (its teardown removes the source), the queue moves to a
/// private serial dispatch queue: the jobs still queued, and every later one, run there,
/// one at a time and in order, but no longer on the loop's thread. An executor cannot
/// refuse a job, and a job dropped would leave its task suspended forever; trapping
/// instead would make a worker's stop crash whenever a task pinned to it is still in
/// flight, which is common: a task the teardown wakes (a message stream's consumer, seeing
/// its port closed) may be resumed through the global executor and hop back to its actor's
/// executor only after the thread has gone (seen in this package's tests).
///
/// Thread safety: `enqueue`, `schedule` and the properties from any thread; the source's
/// callbacks on the loop's thread.
final class LoopJobQueue: @unchecked Sendable {
    enum Lifecycle {
        /// Created off the loop's thread: the source joins the modes at the loop's next pass.
        case scheduling
        /// The source is in the loop's modes: its passes run the jobs.
        case running
        /// The loop's thread has exited: jobs run on this serial queue.
        case orphaned(DispatchQueue)
    }

    /// A job and the executor it was enqueued on, which is the one it must run on.
    struct PendingJob: Sendable {
        enum Target: Sendable {
            case serial(UnownedSerialExecutor)
            case task(UnownedTaskExecutor)
        }

        let job: UnownedJob
        let target: Target

        func run() {
            switch target {
            case .serial(let executor): job.runSynchronously(on: executor)
            case .task(let executor): job.runSynchronously(on: executor)
            }
        }
    }

    let modes: [LoopMode]
    /// The loop; weak so that a loop whose thread exited and whose handles are gone can be
    /// freed while actors still hold the executor. Written in `init` only.
    private(set) weak var loop: ThreadRunLoop?
    /// The loop's poll set, to wake it; kept strongly so enqueueing needs no weak load.
    private let poller: Poller

    // Every field below is protected by `lock`, set once or the loop thread's alone;
    // see architecture.md, exclusivity checks.
    private let lock = Lock()
    @exclusivity(unchecked) private var lifecycle = Lifecycle.scheduling // protected by lock
    @exclusivity(unchecked) private var queued: [PendingJob] = [] // protected by lock

    /// Set once in `init`, before the object is shared; its callbacks run on the loop's thread.
    @exclusivity(unchecked) private var source: InputSource?
    // Loop thread only.
    /// The buffer of the batch before, reused so that a steady flow of jobs allocates nothing.
    @exclusivity(unchecked) private var spare: [PendingJob] = []
    /// True while a batch runs, so that a nested run does not start another job.
    @exclusivity(unchecked) private var isRunningJobs = false
    /// A nested run took the source's signal while a batch ran: signal it again afterwards.
    @exclusivity(unchecked) private var missedTurn = false

    init(loop: ThreadRunLoop, modes: [LoopMode]) {
        precondition(!modes.isEmpty, "an executor needs at least one mode to run its jobs in")
        self.modes = modes
        self.loop = loop
        poller = loop.poller
        // Unowned, not weak: the queue outlives its source's place in the loop (its executor
        // stays in `LoopExecutorTable` for as long as the loop object lives).
        // hot-path: unretained-links (docs/optimization-tips.md)
        source = InputSource(cancel: { [unowned self] loop, _ in
            // Only the teardown removes the source (nothing else can reach it).
            if loop.isTornDown { orphan() }
        }, perform: { [unowned self] in
            runQueuedJobs()
        })
    }

    // MARK: - Any thread

    /// Queues a job and, if the queue was empty, signals the source and wakes the loop.
    func enqueue(_ job: UnownedJob, on target: PendingJob.Target) {
        let pending = PendingJob(job: job, target: target)
        let wasEmpty = lock.withLock { () -> Bool in
            if case .orphaned(let fallback) = lifecycle {
                fallback.async { pending.run() } // under the lock: FIFO with the jobs moved there
                return false
            }
            queued.append(pending)
            return queued.count == 1
        }
        guard wasEmpty else { return }
        source?.signal()
        poller.wake()
    }

    /// Whether the loop's thread has exited, so that jobs run on the fallback queue.
    var isOrphaned: Bool {
        lock.withLock { if case .orphaned = lifecycle { true } else { false } }
    }

    /// How many jobs wait for the loop (for tests and descriptions).
    var count: Int { lock.withLock { queued.count } }

    // MARK: - Scheduling

    /// Puts the source in the loop's modes: at once on the loop's thread, else at its next
    /// pass (as a control action, which runs whatever mode the loop is in).
    func schedule() {
        guard let loop else { return orphan() }
        if loop.isOwnerThread { return scheduled(on: loop) }
        let accepted = loop.runOnOwnerThread { [self] loop in scheduled(on: loop) }
        if !accepted { orphan() } // the thread has exited
    }

    /// Loop thread (or its teardown, which runs the control actions first).
    private func scheduled(on loop: ThreadRunLoop) {
        // During the teardown the source cannot join (and `add` would fail its thread check).
        guard !loop.isTornDown, let source else { return orphan() }
        for mode in modes { loop.add(source, to: mode) }
        lock.withLock { if case .scheduling = lifecycle { lifecycle = .running } }
    }

    /// The loop's thread has exited: moves the queued jobs, and all later ones, to a serial
    /// dispatch queue. Any thread, once.
    private func orphan() {
        lock.withLock {
            if case .orphaned = lifecycle { return }
            let fallback = DispatchQueue(label: "runloopkit.executor-after-thread-exit")
            lifecycle = .orphaned(fallback)
            for pending in queued { fallback.async { pending.run() } }
            queued.removeAll()
        }
    }

    // MARK: - Loop thread

    /// The source's perform: runs the jobs queued so far, in FIFO order.
    private func runQueuedJobs() {
        guard !isRunningJobs else {
            missedTurn = true
            return
        }
        isRunningJobs = true
        // The spare buffer goes to the queue uniquely held (taken, not copied), so that an
        // enqueue while the batch runs appends in place instead of copying it.
        var batch: [PendingJob] = []
        swap(&batch, &spare)
        lock.withLock { swap(&queued, &batch) }
        for index in batch.indices { batch[index].run() }
        // One job, the commonest batch: without the generic bulk removal.
        if batch.count == 1 { batch.removeLast() } else { batch.removeAll(keepingCapacity: true) }
        swap(&batch, &spare)
        isRunningJobs = false
        if missedTurn {
            missedTurn = false
            if lock.withLock({ !queued.isEmpty }) { source?.signal() }
        }
    }
}
