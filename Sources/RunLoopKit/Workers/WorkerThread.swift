import Atomics
import RunLoopCore
import RunLoopSystem

/// A thread that stays alive on its run loop and runs the work handed to it: seed 003's
/// resident network thread, done so that it can be stopped and leaks nothing.
///
/// `init` starts a named thread whose run loop is kept alive by an input source of its
/// own; the worker takes work as soon as `init` returns, even before its thread runs. The
/// thread then sleeps in its loop's default mode and wakes for each perform request
/// (`perform`, `performAndWait`, `submit`), port message, timer or source of that mode, until
/// `stop()`. Then it runs or cancels the work still queued, exits, its run loop is torn
/// down, and it is joined.
///
///     let worker = try WorkerThread(name: "network")
///     try worker.perform { print("on the worker") }
///     let answer = try worker.performAndWait { 6 * 7 }
///     worker.stop()
///
/// Work handed to a worker that is stopping or stopped fails with `RunLoopError.stopped`;
/// a caller waiting for work that a stop cancels wakes with that error. Nothing crashes
/// or hangs (unlike `performSelector:onThread:` on a finished `NSThread`).
///
/// Thread safety: every member may be used from any thread. `stop()` called on the
/// worker's own thread cannot join itself: it asks the loop to stop and returns at once;
/// the thread is joined by the next `stop()` from another thread, or by the handle's
/// deinit. A worker released without `stop()` stops itself (`stop(pending: .run)`) in
/// deinit, which then waits for the work already queued.
public final class WorkerThread: @unchecked Sendable, CustomStringConvertible {
    /// Where a worker is in its life.
    public enum State: Sendable, Hashable {
        /// The thread is being created and its loop prepared (never seen once `init` returned).
        case starting
        /// The thread runs its loop and takes work.
        case running
        /// A stop was requested: no new work is taken; the thread is finishing or not yet joined.
        case stopping
        /// The thread has exited and has been joined.
        case stopped
    }

    /// What `stop` does with work queued but not yet run.
    public enum PendingWork: Sendable, Hashable {
        /// Run it before the thread exits (the default): every request taken before the
        /// stop in the default or common modes runs, in order. Requests for other modes
        /// and delayed performs not yet due are cancelled.
        case run
        /// Cancel it: callers waiting for it get `RunLoopError.stopped` at once, even while
        /// the worker is still busy with the work in progress.
        case cancel
    }

    /// The name given at creation; the thread's system name is its first 15 bytes.
    public let name: String
    /// The worker thread's run loop. Its thread-safe members may be used from any thread;
    /// add items to it from work running on the worker (`ThreadRunLoop.current` there).
    public let loop: ThreadRunLoop
    let control: WorkerControl
    /// `executor`, once asked for: the same object as `loop.executor()`, kept where any
    /// thread can read it without a lock.
    let commonModesExecutor = ManagedAtomicLazyReference<LoopExecutor>()

    /// Starts a worker thread named `name`. It takes work at once: the loop is made here
    /// and adopted by the new thread, so `init` does not wait for that thread to run; work
    /// handed over meanwhile waits in the loop's queue and runs, in order, in its first pass.
    /// Throws the `SystemCallError` of `pthread_create` if the system refuses the thread.
    public convenience init(name: String = "worker") throws(SystemCallError) {
        try self.init(startingNamed: name, setUp: nil)
    }

    /// Starts a worker thread named `name`; `setUp` runs on that thread before its loop
    /// first runs (to add ports, timers or sources to `ThreadRunLoop.current`), and `init`
    /// returns after it. Throws the `SystemCallError` of `pthread_create` if the system refuses the thread.
    public convenience init(name: String, setUp: @escaping @Sendable () -> Void) throws(SystemCallError) {
        try self.init(startingNamed: name, setUp: setUp)
        waitUntilSetUp()
    }

    /// Starts a worker thread named `name` that runs `setUp`, if any, before its loop first
    /// runs, and returns without waiting for it (`waitUntilSetUp()` does): a pool starts all
    /// its workers first, then waits for them, so that their start-ups overlap.
    init(startingNamed name: String, setUp: (@Sendable () -> Void)?) throws(SystemCallError) {
        self.name = name
        control = WorkerControl()
        loop = control.loop
        try control.start(name: name, setUp: setUp)
    }

    /// Blocks until the set-up given to `init(startingNamed:setUp:)` has run on the worker's
    /// thread. Once.
    func waitUntilSetUp() { control.waitUntilSetUp() }

    deinit {
        control.stop(pending: .run, by: .deinitializer)
    }

    /// Where the worker is in its life. Any thread.
    public var state: State { control.state }

    /// Whether the calling thread is this worker's thread. Any thread.
    public var isCurrent: Bool { loop.isOwnerThread }

    /// Stops the worker: no new work is taken, `pending` work is run or cancelled, the loop
    /// exits and the thread is joined before this returns. Any thread, any number of times:
    /// a second call returns once the thread is joined, calls from several threads at once
    /// join once and all return stopped. A `.cancel` after a `.run` still cancels what has
    /// not started. On the worker's own thread it returns at once (see the type's notes).
    ///
    /// The work in progress is never interrupted: `stop` waits for it.
    public func stop(pending: PendingWork = .run) {
        control.stop(pending: pending, by: .caller)
    }

    public var description: String { "WorkerThread(\(name), \(state))" }
}
