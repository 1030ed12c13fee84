import Logging

/// RunLoopKit's loggers, one per subsystem, and its logging policy.
///
/// Policy: RunLoopKit is silent unless asked. swift-log's default handler prints `.info`
/// and above, so RunLoopKit logs below that: `.debug` for what went wrong but is also
/// counted (a dropped message: `LoopCounters`, `PortStatistics`, metrics) or thrown to the
/// caller (a timeout), and for a stale name reclaimed; `.trace` for routine events. It
/// never logs on a hot path (a pass, a delivered message), and `.warning` is kept for
/// what a program cannot learn otherwise: a port handler that threw while no
/// `onHandlerError` was set, and `.error` for a run of a loop that the kernel
/// ended (`RunResult.failed`), which a `run()` that returns nothing cannot tell otherwise.
/// To see its messages, bootstrap a handler with `.debug` for labels starting "runloopkit.".
package enum RunLoopKitLog {
    /// Run loops: metrics set-up, descriptor sources that lost their descriptor.
    package static let loop = Logger(label: "runloopkit.loop")
    /// Ports: dropped messages, replies not sent, timeouts.
    package static let port = Logger(label: "runloopkit.port")
    /// The name server: stale names reclaimed.
    package static let names = Logger(label: "runloopkit.names")
}
