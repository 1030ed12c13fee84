import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
/// Errors of worker threads, worker pools and the main loop's perform calls.
///
/// Work handed to a worker either runs or fails with one of these; it is never dropped
/// silently, and a caller waiting for it is never left blocked.
public enum WorkerError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The worker (or pool) is stopping or has stopped: the work was not run. Thrown at
    /// once when work is handed to a worker that no longer takes any, and to a caller
    /// waiting for work that the stop cancelled.
    case stopped
    /// The work was cancelled (`cancelPerformRequests`) before it ran.
    case cancelled
    /// The system refused to create the thread (`pthread_create`'s error number).
    case threadCreationFailed(errno: Int32)
    /// Not every worker of a pool checked in before the timeout; the pool stopped those that did start.
    case checkInTimedOut(expected: Int, checkedIn: Int)
    /// A pool's check-in port, or a worker's own port, could not be created, or a worker's
    /// check-in could not be sent.
    case checkInFailed(PortError)

    public var description: String {
        switch self {
        case .stopped: "the worker has stopped: the work was not run"
        case .cancelled: "the work was cancelled before it ran"
        case .threadCreationFailed(let errno): "pthread_create failed with error \(errno)"
        case .checkInTimedOut(let expected, let checkedIn):
            "only \(checkedIn) of \(expected) workers checked in before the timeout"
        case .checkInFailed(let error): "a worker could not check in: \(error)"
        }
    }
}
