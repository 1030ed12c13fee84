import RunLoopSystem
/// Errors of run-loop operations.
public enum RunLoopError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The loop's thread has exited, so the loop can no longer run work.
    case loopTerminated
    /// The request was cancelled before it ran.
    case cancelled

    public var description: String {
        switch self {
        case .loopTerminated: "the run loop's thread has exited"
        case .cancelled: "the request was cancelled before it ran"
        }
    }
}
