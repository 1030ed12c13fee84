import Glibc

/// A UNIX signal, by number, for signal sources.
public struct UnixSignal: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Ctrl-C (`SIGINT`).
    public static let interrupt = UnixSignal(rawValue: SIGINT)
    /// A polite request to end, from a supervisor or `kill` (`SIGTERM`).
    public static let terminate = UnixSignal(rawValue: SIGTERM)
    /// The terminal went away; by convention also "reload your configuration" (`SIGHUP`).
    public static let hangUp = UnixSignal(rawValue: SIGHUP)
    /// Ctrl-\ (`SIGQUIT`).
    public static let quit = UnixSignal(rawValue: SIGQUIT)
    public static let user1 = UnixSignal(rawValue: SIGUSR1)
    public static let user2 = UnixSignal(rawValue: SIGUSR2)
    /// A child process stopped or exited (`SIGCHLD`).
    public static let childStatusChanged = UnixSignal(rawValue: SIGCHLD)
    /// The terminal's size changed (`SIGWINCH`).
    public static let windowSizeChanged = UnixSignal(rawValue: SIGWINCH)

    public var description: String {
        switch rawValue {
        case SIGINT: "SIGINT"
        case SIGTERM: "SIGTERM"
        case SIGHUP: "SIGHUP"
        case SIGQUIT: "SIGQUIT"
        case SIGUSR1: "SIGUSR1"
        case SIGUSR2: "SIGUSR2"
        case SIGCHLD: "SIGCHLD"
        case SIGWINCH: "SIGWINCH"
        case SIGKILL: "SIGKILL"
        case SIGABRT: "SIGABRT"
        case SIGSEGV: "SIGSEGV"
        default: "signal \(rawValue)"
        }
    }
}
