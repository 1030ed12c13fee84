/// The tool's exit codes, documented in `runloopkit --help` and docs/cli.md.
enum ToolExit: Int32, Sendable {
    case ok = 0
    /// Bad arguments: unknown option, missing value, invalid name or address, unreadable file.
    case usage = 1
    /// No port was ever registered under the name (it has no lock file).
    case unknownName = 2
    /// The name's lock file is there but no live process holds it: its owner died.
    case deadOwner = 3
    /// The port did not take a message, or no reply came, before the timeout.
    case timeout = 4
    /// Anything else: a transport or system error.
    case failure = 5

    /// The kind of error, as `--json` output names it.
    var kind: String {
        switch self {
        case .ok: "ok"
        case .usage: "usage"
        case .unknownName: "unknownName"
        case .deadOwner: "deadOwner"
        case .timeout: "timeout"
        case .failure: "failure"
        }
    }
}
