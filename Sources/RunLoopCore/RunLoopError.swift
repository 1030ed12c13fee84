/// Errors of handing work to a loop's thread: a run loop's, a worker's, a pool's or the
/// main loop's perform calls.
///
/// Work handed over either runs or fails with one of these; it is never dropped silently,
/// and a caller waiting for it is never left blocked. One of RunLoopKit's three error
/// types, with `PortError` (ports and the check-in) and `SystemCallError` (a call into the
/// kernel or libzmq, such as `pthread_create` when a worker's thread cannot start).
public enum RunLoopError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The loop's thread has exited, so the loop can no longer run work.
    case loopTerminated
    /// The worker (or pool, or main loop) is stopping or has stopped: the work was not
    /// run. Thrown at once when work is handed to one that no longer takes any, and to a
    /// caller waiting for work that the stop cancelled.
    case stopped
    /// The work was cancelled before it ran.
    case cancelled

    public var description: String {
        switch self {
        case .loopTerminated: "the run loop's thread has exited"
        case .stopped: "the worker has stopped: the work was not run"
        case .cancelled: "the work was cancelled before it ran"
        }
    }
}
