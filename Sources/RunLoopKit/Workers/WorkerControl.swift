import RunLoopCore
import RunLoopSystem
import Dispatch

/// What a worker's handle and its thread share: the lifecycle, the loop, and the gate
/// through which work enters the loop.
///
/// The loop and its keep-alive are made on the creating thread, and the new thread adopts
/// the loop as its own; so the worker takes work as soon as its thread is created, without
/// waiting for that thread to run: work queued meanwhile waits in the loop's queue, and a
/// stop requested meanwhile is seen before the loop's first pass.
///
/// Work enters only while the worker is running, inside the same lock that `stop` takes
/// to leave `.running`. So everything accepted is in the loop's queue before the worker
/// thread sees the stop, and its last step (run or cancel what is pending) sees all of
/// it; anything queued on the loop directly after that step is cancelled by the loop's
/// teardown when the thread exits. No request is left pending, no waiter left blocked.
final class WorkerControl: @unchecked Sendable {
    enum Lifecycle {
        /// The thread is not created yet.
        case starting
        /// The thread is created (it may not run yet): work is taken.
        case running
        /// Exit requested; the pending-work policy is what the thread's last step applies.
        case stopping(WorkerThread.PendingWork, StopTransition.Joining)
        /// Exited and joined.
        case stopped
    }

    /// The worker's loop, made here and adopted by the worker thread as it starts.
    let loop: ThreadRunLoop
    /// Keeps `loop`'s resident run going; installed by the worker thread.
    private let keepAlive: KeepAlive
    private let lock = Lock()
    private var lifecycle = Lifecycle.starting // protected by lock
    private var thread: NativeThread? // protected by lock; set once the thread is created
    /// Signalled once the set-up has run on the worker thread (only when there is one).
    private let setUpDone = DispatchSemaphore(value: 0)
    /// Opened once the thread is joined.
    private let joined = JoinGate()

    init() {
        loop = ThreadRunLoop.makeForAdoption()
        keepAlive = KeepAlive(for: loop)
    }

    // MARK: - Start

    /// Starts the thread; the worker is running (takes work) once this returns, whether or
    /// not the thread runs yet. `setUp`, if any, runs on the thread before its loop first
    /// runs; `waitUntilSetUp()` waits for it.
    func start(name: String, setUp: (@Sendable () -> Void)?) throws(SystemCallError) {
        let thread = try NativeThread.start(name: name) { [self] in main(setUp: setUp) }
        lock.withLock {
            self.thread = thread
            lifecycle = .running
        }
    }

    /// Blocks until the set-up given to `start` has run on the worker thread. Once, and
    /// only after a `start` with a set-up.
    func waitUntilSetUp() { setUpDone.wait() }

    /// The worker thread's body: the resident run, then the pending work, then exit.
    private func main(setUp: (() -> Void)?) {
        loop.adoptOnCallingThread()
        keepAlive.install()
        if let setUp {
            setUp()
            setUpDone.signal()
        }
        keepAlive.runUntilExitRequested(loop)
        finishPendingWork()
        keepAlive.remove()
        // Returning exits the thread; the loop's teardown (a thread-exit destructor)
        // cancels whatever was queued on the loop directly since, and waiters wake.
    }

    /// The thread's last step: runs or cancels the work queued before the stop.
    private func finishPendingWork() {
        let pending = lock.withLock { () -> WorkerThread.PendingWork in
            if case .stopping(let pending, _) = lifecycle { return pending }
            return .cancel
        }
        switch pending {
        // One batch, in FIFO order: what the resident run would have run next. Requests
        // for other modes, and delayed ones not yet due, are cancelled by the teardown.
        case .run: _ = loop.performQueuedRequests(in: .default)
        case .cancel: loop.cancelPerformRequests()
        }
    }

    // MARK: - Work

    var state: WorkerThread.State {
        lock.withLock {
            switch lifecycle {
            case .starting: .starting
            case .running: .running
            case .stopping: .stopping
            case .stopped: .stopped
            }
        }
    }

    var isRunning: Bool { state == .running }

    /// Queues work on the loop if the worker is running; nil once it is stopping.
    func enqueue(inModes modes: [LoopMode], tag: String?, _ work: @escaping @Sendable () -> Void) -> PerformRequest? {
        lock.withLock {
            guard case .running = lifecycle else { return nil }
            return loop.perform(inModes: modes, tag: tag, work)
        }
    }

    /// The error for a waiter whose request was cancelled: by a stop, or by `cancelPerformRequests`.
    var cancellationError: RunLoopError { isRunning ? .cancelled : .stopped }

    // MARK: - Stop

    /// Asks the thread to exit, applying `pending` to the queued work, then joins it,
    /// waits for whoever joins it, or leaves the joining to another, depending on
    /// `stopper` and on whether this is the worker's own thread.
    func stop(pending: WorkerThread.PendingWork, by stopper: StopTransition.Stopper) {
        let onWorker = loop.isOwnerThread
        let (role, thread, requestExit, cancelQueued) = lock.withLock {
            () -> (StopTransition.Role, NativeThread?, Bool, Bool) in
            let joining: StopTransition.Joining?
            let policy: WorkerThread.PendingWork
            let cancelQueued: Bool
            switch lifecycle {
            case .starting, .stopped:
                return (.none, nil, false, false)
            case .running:
                joining = nil
                policy = pending
                cancelQueued = pending == .cancel
            case .stopping(let current, let currentJoining):
                joining = currentJoining
                // A later stop may cancel what an earlier one would have run.
                policy = pending == .cancel ? .cancel : current
                cancelQueued = pending == .cancel && current == .run
            }
            let (next, role) = StopTransition.stop(from: joining, by: stopper, onOwnThread: onWorker)
            lifecycle = .stopping(policy, next)
            return (role, self.thread, joining == nil, cancelQueued)
        }
        // Cancelling here, not only on the worker thread, wakes waiters at once even
        // while the worker is busy with the work in progress.
        if cancelQueued { loop.cancelPerformRequests() }
        if requestExit { keepAlive.requestExit() }
        switch role {
        case .none:
            break
        case .join:
            thread!.join()
            lock.withLock { lifecycle = .stopped }
            joined.open()
        case .waitForJoiner:
            joined.wait()
        case .detach:
            thread!.detach()
        }
    }
}
