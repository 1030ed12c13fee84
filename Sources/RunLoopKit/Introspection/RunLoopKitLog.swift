import Logging

/// RunLoopKit's loggers, one per subsystem, and its logging policy.
///
/// Policy: RunLoopKit is silent unless asked. swift-log's default handler prints `.info`
/// and above, so RunLoopKit logs below that: `.debug` for what went wrong but is also
/// counted (a dropped message: `LoopCounters`, `PortStatistics`, metrics) or thrown to the
/// caller (a timeout), and for a stale name reclaimed; `.trace` for routine events. It
/// never logs on a hot path (a pass, a delivered message), and `.warning` is kept for
/// what a program cannot learn otherwise: a port handler that threw while no
/// `handlerErrorHandler` was set.
/// To see its messages, bootstrap a handler with `.debug` for labels starting "runloopkit.".
enum RunLoopKitLog {
    /// Run loops: metrics set-up.
    static let loop = Logger(label: "runloopkit.loop")
    /// Ports: dropped messages, replies not sent, timeouts.
    static let port = LocalPort.logger
    /// The name server: stale names reclaimed.
    static let names = Logger(label: "runloopkit.names")

    /// Logs a send or reply timeout at `.debug`, and returns it to be thrown.
    static func timedOut(_ error: PortError) -> PortError {
        port.debug("timed out", metadata: ["error": "\(error)"])
        return error
    }
}
