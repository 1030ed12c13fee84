import RunLoopCore
import RunLoopSystem
import RunLoopZMQ
import Glibc
import Synchronization

/// What a thread that exits, and a process that ends normally, do before they go: wait,
/// at most `RemotePort.exitFlushLimit`, until libzmq has written out to the kernel what
/// their sends to other processes (ipc and tcp) accepted.
///
/// A send returns once libzmq queued the message; libzmq's I/O thread writes it to the
/// kernel afterwards. The process-wide context is never terminated, so the I/O thread
/// ends with the process, and whatever it still held would be lost. So each connection to
/// another process is closed with a linger of the limit (libzmq goes on writing its queue
/// out for at most that long) and the ending thread waits on the connections' monitors
/// until libzmq is done with every closed socket (`ZMQConnectionMonitor.closeCompleted()`;
/// over ipc, until the receiver has also read it from the kernel, each of its reads
/// waking the wait through a `PeerReadWatch`), or the limit passed:
/// all of a thread's connections at once, so the whole wait is at most the limit.
/// A wait for ipc receivers' read is logged once, at `.trace` ("exit flush awaits the
/// receivers' read"). Connections not done by then are logged as a warning with their
/// count (the one way a program that is ending can learn of it): what libzmq still held
/// for them is lost.
///
/// When: a thread's exit (its `ThreadPortState`'s destructor), and the process's exit
/// (`exit`, a return from `main`), through an `atexit` handler registered when a thread
/// first connects to another process. The handler flushes the exiting thread's own
/// connections: those of threads still running at exit belong to them (a ZeroMQ socket
/// never moves between threads) and are not waited for. A child the process forked
/// flushes nothing, at its `exit` or a thread's: what it inherited is its parent's.
enum ExitFlush {
    /// `RemotePort.exitFlushLimit`, in nanoseconds.
    static let limitNanoseconds = Atomic<Int64>(5_000_000_000)

    /// `RemotePort.exitFlushLimit`.
    static var limit: Duration { .nanoseconds(limitNanoseconds.load(ordering: .relaxed)) }

    /// When the flush runs, for the log.
    enum Occasion: String {
        case threadExit = "thread exit"
        case processExit = "process exit"
    }

    /// Registers the process's exit handler, once: called when a thread connects to
    /// another process.
    static func registerExitHandler() {
        _ = exitHandlerProcess
    }

    /// The process that registered the exit handler: a child it forks inherits the handler
    /// with its parent's connections, whose libzmq state did not survive the fork.
    private static let exitHandlerProcess: pid_t = {
        atexit { ExitFlush.processIsExiting() }
        return getpid()
    }()

    /// The exit handler, on the thread that called `exit` (the main thread, for a return
    /// from `main`): flushes that thread's connections, if it has any (none are made). In
    /// a forked child it does nothing: the connections are its parent's.
    private static func processIsExiting() {
        guard getpid() == exitHandlerProcess else { return }
        ThreadPortState.existing?.closeAllFlushing(at: .processExit)
    }

    /// Closes `connections`: those to other processes with what they queued written out,
    /// waiting at most `limit` for all of them; the others (in-process) as any connection
    /// closes. Returns how many were not written out within the limit, and logs them as a
    /// warning. The connections must not be used again.
    @discardableResult
    static func close(_ connections: [PortConnection], at occasion: Occasion,
                      within limit: Duration = ExitFlush.limit) -> Int {
        guard limit > .zero else { return 0 } // released, they close with the context's linger
        // Each linger starts when its socket closes, after the deadline's start: a socket
        // that used its whole linger reports after the deadline, never before it.
        let deadline = Deadline.after(limit)
        var pending = connections.compactMap { $0.closeFlushing(linger: limit) }
        var failed = 0
        var toldOfTheReadAwaited = false
        // Over ipc, once libzmq is done, each read by the receiver wakes the wait.
        var reads: PeerReadWatch?
        while true {
            pending.removeAll { monitor in
                do { return try monitor.closeCompleted() } catch { failed += 1; return true }
            }
            let now = Deadline.now()
            guard !pending.isEmpty, now < deadline else { break }
            let awaited = pending.compactMap(\.peerAwaited)
            if !awaited.isEmpty, !toldOfTheReadAwaited {
                toldOfTheReadAwaited = true
                RunLoopKitLog.port.trace("exit flush awaits the receivers' read", metadata: [
                    "occasion": "\(occasion.rawValue)", "connections": "\(awaited.count)",
                ])
            }
            // Watched after the check: a read since then makes the watch ready at once.
            var watching = true
            for fd in awaited {
                do {
                    if reads == nil { reads = try PeerReadWatch() }
                    try reads?.watch(fd)
                } catch {
                    watching = false // at the descriptor limit: look every 2 ms instead
                }
            }
            let slice = watching ? deadline - now : min(deadline - now, .milliseconds(2))
            do {
                _ = try ZMQSocket.poll(pending.map { ($0.socket, .pollIn) }, orReadable: reads?.descriptor, timeout: slice)
            } catch {
                break
            }
            reads?.drain()
        }
        let notFlushed = pending.count + failed
        if notFlushed > 0 {
            RunLoopKitLog.port.warning("messages not flushed at \(occasion.rawValue)", metadata: [
                "connections": "\(notFlushed)", "limit": "\(limit)",
                "detail": "what libzmq still held for them is lost: their peers did not read it in time (RemotePort.exitFlushLimit)",
            ])
        }
        return notFlushed
    }
}

extension RemotePort {
    /// How long a thread that exits, or a process that ends normally (`exit`, a return from
    /// `main`, `MainLoop.run(stoppingOn:)` returning), waits at most for what its sends to
    /// other processes (ipc and tcp) accepted to be written out to the kernel: 5 seconds
    /// unless set. The wait ends as soon as everything is written, so it is only as long
    /// as the receivers take to read what was queued; what is not written by then is lost,
    /// and a warning says how many connections it concerns. Zero flushes nothing.
    ///
    /// These endings run no flush and lose what libzmq still held, up to the high-water
    /// marks: `_exit`, `exec`, a crash or a trap, a signal the process does not handle
    /// (`SIGKILL`, or `SIGTERM` without `MainLoop.run(stoppingOn:)`), and any end of a
    /// forked child (its connections are its parent's). A process's exit waits only for the exiting thread's
    /// sends: stop other senders first (`WorkerThread.stop()`, whose thread's exit waits
    /// for its own). At most 24.8 days (libzmq's linger is `Int32` milliseconds). Any thread.
    public static var exitFlushLimit: Duration {
        get { ExitFlush.limit }
        set {
            // At most libzmq's longest linger, Int32.max milliseconds (24.8 days).
            let (seconds, attoseconds) = newValue.components
            let longest = Int64(Int32.max) * 1_000_000
            let value: Int64 = if seconds < 0 { 0 } else if seconds >= longest / 1_000_000_000 { longest } else {
                seconds * 1_000_000_000 + attoseconds / 1_000_000_000
            }
            ExitFlush.limitNanoseconds.store(max(0, value), ordering: .relaxed)
        }
    }
}
