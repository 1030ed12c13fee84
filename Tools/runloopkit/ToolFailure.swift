import RunLoopKit

/// Why a command failed: one line for stderr, and the exit code.
struct ToolFailure: Error, Sendable {
    let exit: ToolExit
    let message: String
    /// Whether the command already printed its (partial) result, so that `--json` output
    /// does not add an error object after it.
    var printedResult = false

    init(_ exit: ToolExit, _ message: String) {
        self.exit = exit
        self.message = message
    }
}

extension ToolFailure {
    /// The failure for a RunLoopKit error while talking to `target`, `timeout` seconds allowed.
    static func from(_ error: PortError, target: String, timeout: Double? = nil) -> ToolFailure {
        let within = timeout.map { " within \(ToolFormat.seconds($0))" } ?? ""
        switch error {
        case .sendTimedOut:
            return ToolFailure(.timeout, "timed out: '\(target)' did not take the message\(within) (busy, or not running its loop)")
        case .receiveTimedOut:
            return ToolFailure(.timeout, "timed out: no reply from '\(target)'\(within)")
        case .nameNotFound(let name):
            return ToolFailure(.unknownName, "unknown port name '\(name)'")
        case .invalidName, .invalidAddress, .invalidKey:
            return ToolFailure(.usage, "\(error)")
        default:
            return ToolFailure(.failure, "\(target): \(error)")
        }
    }
}
