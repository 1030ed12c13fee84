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

    public var description: String {
        switch self {
        case .finished: "finished"
        case .stopped: "stopped"
        case .timedOut: "timedOut"
        case .handledSource: "handledSource"
        }
    }
}
