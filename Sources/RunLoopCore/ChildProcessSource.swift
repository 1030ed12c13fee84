import RunLoopSystem
import Glibc

/// How a child process ended.
public enum ChildExit: Sendable, Equatable, CustomStringConvertible {
    /// It exited with this status (`exit(status)`).
    case exited(Int32)
    /// A signal ended it (`kill -9`: `.signalled(9, …)`).
    case signalled(Int32, coreDumped: Bool)
    /// It ended, but its status could not be collected: it is not a child of this process,
    /// or something else (a `waitpid(-1, …)` elsewhere) reaped it first.
    case statusUnavailable(SystemCallError)

    public var description: String {
        switch self {
        case .exited(let status): "exited with status \(status)"
        case .signalled(let signal, let core):
            "killed by \(UnixSignal(rawValue: signal))\(core ? " (core dumped)" : "")"
        case .statusUnavailable(let error): "ended, status unavailable: \(error)"
        }
    }
}

/// A child process as a run-loop source: when it ends, its handler gets the exit status or
/// the signal that ended it, once, on the loop's thread; the child is reaped (no zombie),
/// and the source is then invalid.
///
///     let child = try ChildProcessSource(pid: pid) { exit in print("worker \(exit)") }
///     ThreadRunLoop.current.add(child, to: .default)
///
/// Where the kernel has pidfds (Linux 5.3 and later; `waitid(P_PIDFD)` from 5.4) the source
/// watches a pidfd (`pidfd_open`), which becomes readable the moment the child ends. Where
/// it does not (`ENOSYS`), it falls back to a `SIGCHLD` signal source and, on each
/// `SIGCHLD`, asks `waitid(P_PID, pid, WNOHANG)` whether this child ended (SIGCHLDs for
/// other children only cost that call). Either way it is a `DescriptorSource` of the loop:
/// in modes, handled as a source, idle at no cost.
///
/// Only a child of this process can be reaped; for any other process the handler gets
/// `.statusUnavailable` when it ends (with pidfds) — for a peer that is not a child, watch
/// its named port instead (RunLoopKit's `PortLossSource`). Do not let anything else reap
/// the child (Foundation's `Process` does: spawn with `posix_spawn` instead).
///
/// Once added to a loop, the loop keeps the source until it fires or is invalidated; a
/// source on no loop stops watching when released.
///
/// Thread safety: `invalidate()` and `isValid` from any thread; the handler runs on the
/// loop's thread.
public final class ChildProcessSource: @unchecked Sendable {
    public let pid: pid_t

    private enum Watch {
        case pidfd(DescriptorSource)
        /// The fallback: SIGCHLD, then a `waitid` for this pid.
        case childSignal(SignalSource)
    }
    private let watch: Watch
    /// Loop thread only (the handler's); released once told.
    private var handler: ((ChildExit) -> Void)?

    /// Watches child `pid`. Throws `ESRCH` if no such process exists.
    public convenience init(pid: pid_t, handler: @escaping (ChildExit) -> Void) throws(SystemCallError) {
        try self.init(pid: pid, usePidfd: true, handler: handler)
    }

    /// `usePidfd: false` forces the SIGCHLD fallback (for tests).
    init(pid: pid_t, usePidfd: Bool, handler: @escaping (ChildExit) -> Void) throws(SystemCallError) {
        self.pid = pid
        self.handler = handler
        var pidfd: Int32 = -1
        if usePidfd {
            do {
                pidfd = try Kernel.processDescriptor(pid)
            } catch where error.errno == ENOSYS {
                pidfd = -1
            }
        }
        if pidfd >= 0 {
            let box = ChildBox()
            watch = .pidfd(DescriptorSource(descriptor: pidfd, watching: .readable, ownership: .owned) { event in
                if case .ready = event { box.child?.pidfdReady(pidfd) }
            })
            box.child = self
            descriptorSource.wrapper = self
        } else {
            do {
                try systemCall("kill(\(pid), 0)") { kill(pid, 0) }
            } catch where error.errno == EPERM {
                // exists, but not ours to signal: still watched
            }
            let box = ChildBox()
            let signals = try SignalSource(.childStatusChanged) { _ in box.child?.childSignalled() }
            watch = .childSignal(signals)
            box.child = self
            descriptorSource.wrapper = self
            // It may have ended before SIGCHLD was watched: look once when the loop first runs it.
            var one: UInt64 = 1
            _ = try? systemCall("write(eventfd)") { write(signals.descriptorSource.descriptor, &one, 8) }
        }
    }

    deinit { invalidate() }

    public var isValid: Bool { descriptorSource.isValid }

    /// Stops watching (the child is not reaped). Any thread.
    public func invalidate() {
        switch watch {
        case .pidfd(let source): source.invalidate()
        case .childSignal(let source): source.invalidate()
        }
    }

    /// Whether the source watches a pidfd (false: the SIGCHLD fallback).
    public var usesPidfd: Bool {
        if case .pidfd = watch { true } else { false }
    }

    var descriptorSource: DescriptorSource {
        switch watch {
        case .pidfd(let source): source
        case .childSignal(let source): source.descriptorSource
        }
    }

    // MARK: - On the loop's thread

    private func pidfdReady(_ pidfd: Int32) {
        do {
            // Readable means it ended; no end collected would mean it has not (never, for a pidfd).
            if let ended = try Kernel.collectChild(pidfd: pidfd) { finish(ChildProcessSource.exit(from: ended)) }
        } catch {
            finish(.statusUnavailable(error))
        }
    }

    private func childSignalled() {
        do {
            if let ended = try Kernel.collectChild(pid: pid), ended.pid == pid { finish(ChildProcessSource.exit(from: ended)) }
        } catch {
            finish(.statusUnavailable(error))
        }
    }

    private func finish(_ exit: ChildExit) {
        let handler = self.handler
        self.handler = nil
        invalidate()
        handler?(exit)
    }

    private static func exit(from ended: EndedChild) -> ChildExit {
        switch ended.code {
        case Int32(CLD_EXITED): .exited(ended.status)
        case Int32(CLD_DUMPED): .signalled(ended.status, coreDumped: true)
        default: .signalled(ended.status, coreDumped: false)
        }
    }
}

/// The child source, weakly, for its descriptor's handler (see `DescriptorSource.wrapper`
/// for what keeps it alive).
private final class ChildBox: @unchecked Sendable {
    weak var child: ChildProcessSource? // set once, in the source's init, before any event
}

extension ThreadRunLoop {
    /// Adds a child-process source to `mode`: its handler is called on this loop's thread,
    /// during a run in one of its modes, once the child has ended.
    public func add(_ source: ChildProcessSource, to mode: LoopMode = .default) {
        add(source.descriptorSource, to: mode)
    }

    public func remove(_ source: ChildProcessSource, from mode: LoopMode = .default) {
        remove(source.descriptorSource, from: mode)
    }

    public func contains(_ source: ChildProcessSource, in mode: LoopMode = .default) -> Bool {
        contains(source.descriptorSource, in: mode)
    }
}
