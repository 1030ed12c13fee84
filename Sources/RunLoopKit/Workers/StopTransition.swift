import RunLoopCore

/// How one `stop` call moves a worker (or a pool of them) on, and what its caller then
/// does: the one decision `WorkerControl.stop` and `WorkerPool.stop` share, written as a
/// pure function so that every case is tested on its own (`StopTransitionTests`).
///
/// A stopped thread's resources are released exactly once, by one join or one detach.
/// The first stop from another thread claims the join; later ones wait for it; a stop
/// from the worker's own thread only asks (a thread cannot join itself), except that a
/// handle released on its own thread detaches it, since no one else ever will.
enum StopTransition {
    /// Who releases the stopped thread's resources: exactly one of join or detach.
    enum Joining: Equatable {
        /// Asked to stop, but nobody joins yet (the stops so far came from its own thread).
        case unclaimed
        /// A thread is joining; other stoppers wait for it.
        case claimed
        /// The handle was released on the worker's own thread: the thread frees itself.
        case detached
    }

    /// Who asks for the stop.
    enum Stopper: Equatable {
        /// `stop()`: joins (or waits for the joiner), unless on the worker's own thread.
        case caller
        /// The handle's deinit: joins, or detaches when on the worker's own thread.
        case deinitializer
        /// The first phase of a pool's shutdown: only asks, so that all workers stop at once.
        case requestOnly
    }

    /// What the stopper does after the transition (outside the lock).
    enum Role: Equatable {
        /// Nothing more: another stopper joins, or the thread detached itself.
        case none
        /// Join the thread, then mark it stopped and open the gate for waiters.
        case join
        /// Wait until the joiner opens the gate.
        case waitForJoiner
        /// Detach the thread: it frees itself as it exits.
        case detach
    }

    /// The stop of something running (`joining` nil) or already stopping, by `stopper`,
    /// from its own thread or not: the joining that follows and the stopper's role.
    static func stop(from joining: Joining?, by stopper: Stopper, onOwnThread: Bool) -> (Joining, Role) {
        switch (joining ?? .unclaimed, stopper, onOwnThread) {
        case (.unclaimed, .caller, false), (.unclaimed, .deinitializer, false):
            (.claimed, .join)
        case (.unclaimed, .deinitializer, true):
            (.detached, .detach)
        case (.claimed, .caller, false):
            (.claimed, .waitForJoiner)
        case (let unchanged, _, _):
            (unchanged, .none)
        }
    }
}

/// The gate the stoppers of one worker or pool wait at until its joiner has joined it:
/// opened once (the joiner, after the join), and every waiter goes through.
typealias JoinGate = OnceGate
