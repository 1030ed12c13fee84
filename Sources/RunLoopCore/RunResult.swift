import RunLoopSystem

/// Why a run of the loop returned (`CFRunLoopRunResult`).
public enum RunResult: Sendable, Hashable, CustomStringConvertible {
    /// The mode had no sources or timers (at entry, or once they were gone).
    case finished
    /// `stop()` was called for this run (or before it started).
    case stopped
    /// The time limit passed.
    case timedOut
    /// A non-timer source was handled and the run was asked to return after one.
    case handledSource
    /// The kernel refused the loop's sleep: a port's or the main queue's descriptor could
    /// not join the poll set (at the descriptor limit, say), or the wait itself failed.
    /// The run ended there (the error is logged too); a later run tries again.
    case failed(SystemCallError)

    public var description: String {
        switch self {
        case .finished: "finished"
        case .stopped: "stopped"
        case .timedOut: "timedOut"
        case .handledSource: "handledSource"
        case .failed(let error): "failed: \(error)"
        }
    }
}
