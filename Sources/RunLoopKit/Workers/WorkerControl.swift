import RunLoopCore
import RunLoopSystem

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
    /// The worker's loop, made here and adopted by the worker thread as it starts.
    let loop: ThreadRunLoop
    /// Keeps `loop`'s resident run going; installed by the worker thread.
    private let keepAlive: KeepAlive
    private let lock = Lock()
    private var lifecycle = Lifecycle<NativeThread>.starting // protected by lock
    /// Signalled once the set-up has run on the worker thread (only when there is one).
    private let setUpDone = OnceGate()
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
        lock.withLock { lifecycle.started(thread) }
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
            setUpDone.open()
        }
        keepAlive.runUntilExitRequested(loop)
        finishPendingWork()
        keepAlive.remove()
        // Returning exits the thread; the loop's teardown (a thread-exit destructor)
        // cancels whatever was queued on the loop directly since, and waiters wake.
    }

    /// The thread's last step: runs or cancels the work queued before the stop.
    private func finishPendingWork() {
        let pending = lock.withLock { lifecycle.pendingWork }
        switch pending {
        // One batch, in FIFO order: what the resident run would have run next. Requests
        // for other modes, and delayed ones not yet due, are cancelled by the teardown.
        case .run: _ = loop.performQueuedRequests(in: .default)
        case .cancel: loop.cancelPerformRequests()
        }
    }

    // MARK: - Work

    var state: WorkerThread.State {
        lock.withLock { lifecycle.state }
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
        let effect = lock.withLock { lifecycle.stop(pending: pending, by: stopper, onOwnThread: onWorker) }
        // Cancelling here, not only on the worker thread, wakes waiters at once even
        // while the worker is busy with the work in progress.
        if effect.cancelQueued { loop.cancelPerformRequests() }
        if effect.requestExit { keepAlive.requestExit() }
        switch effect.then {
        case .none:
            break
        case .join(let thread):
            thread.join()
            lock.withLock { lifecycle.joined() }
            joined.open()
        case .waitForJoiner:
            joined.wait()
        case .detach(let thread):
            thread.detach()
        }
    }
}

extension WorkerControl {
    /// Where a worker is in its life, holding its thread from the moment there is one:
    /// starting → running → stopping → stopped. Its transitions are pure (generic over the
    /// thread, so that they are tested without one: `WorkerControlLifecycleTests`); the
    /// control applies them under its lock and does what they return outside it.
    enum Lifecycle<Thread> {
        /// The thread is not created yet.
        case starting
        /// The thread is created (it may not run yet): work is taken.
        case running(Thread)
        /// Exit requested; the pending-work policy is what the thread's last step applies,
        /// the joining who releases the thread.
        case stopping(Thread, WorkerThread.PendingWork, StopTransition.Joining)
        /// Exited and joined.
        case stopped

        /// What one stop does after its transition, outside the lock, in this order.
        struct StopEffect {
            /// Cancel the loop's queued requests at once (wakes their waiters even while the
            /// worker is busy): the first stop with `.cancel`, or one that overrides `.run`.
            var cancelQueued: Bool
            /// Ask the resident run to exit: the first stop only.
            var requestExit: Bool
            /// Then release the thread, wait for its joiner, or nothing (`StopTransition`).
            var then: StopAction
        }

        /// `StopTransition.Role`, with the thread the role acts on.
        enum StopAction {
            case none
            /// Join the thread, then `joined()`, then open the gate for waiters.
            case join(Thread)
            case waitForJoiner
            case detach(Thread)
        }

        /// The thread was created: the worker runs.
        mutating func started(_ thread: Thread) {
            self = .running(thread)
        }

        /// A stop by `stopper` asking `pending` for the queued work. A later stop may cancel
        /// what an earlier one would have run, never the reverse. Before the thread exists
        /// and once it is stopped, nothing happens.
        mutating func stop(pending: WorkerThread.PendingWork, by stopper: StopTransition.Stopper,
                           onOwnThread: Bool) -> StopEffect {
            switch self {
            case .starting, .stopped:
                return StopEffect(cancelQueued: false, requestExit: false, then: .none)
            case .running(let thread):
                let (joining, role) = StopTransition.stop(from: nil, by: stopper, onOwnThread: onOwnThread)
                self = .stopping(thread, pending, joining)
                return StopEffect(cancelQueued: pending == .cancel, requestExit: true,
                                  then: StopAction(role, thread))
            case .stopping(let thread, let current, let joining):
                let (next, role) = StopTransition.stop(from: joining, by: stopper, onOwnThread: onOwnThread)
                self = .stopping(thread, pending == .cancel ? .cancel : current, next)
                return StopEffect(cancelQueued: pending == .cancel && current == .run, requestExit: false,
                                  then: StopAction(role, thread))
            }
        }

        /// The joiner joined the thread.
        mutating func joined() {
            self = .stopped
        }

        /// What the thread's last step does with the queued work: cancel it unless a stop
        /// asked to run it.
        var pendingWork: WorkerThread.PendingWork {
            if case .stopping(_, let pending, _) = self { return pending }
            return .cancel
        }

        var state: WorkerThread.State {
            switch self {
            case .starting: .starting
            case .running: .running
            case .stopping: .stopping
            case .stopped: .stopped
            }
        }
    }
}

extension WorkerControl.Lifecycle.StopAction {
    init(_ role: StopTransition.Role, _ thread: Thread) {
        switch role {
        case .none: self = .none
        case .join: self = .join(thread)
        case .waitForJoiner: self = .waitForJoiner
        case .detach: self = .detach(thread)
        }
    }
}

extension WorkerControl.Lifecycle: Equatable where Thread: Equatable {}
extension WorkerControl.Lifecycle.StopEffect: Equatable where Thread: Equatable {}
extension WorkerControl.Lifecycle.StopAction: Equatable where Thread: Equatable {}
