import RunLoopSystem
import CAcceptGuard
import CZeroMQ
import Glibc

/// A ZeroMQ context: the I/O thread and the socket table behind a set of sockets,
/// wrapping `zmq_ctx_new`, `zmq_ctx_set`, `zmq_ctx_shutdown` and `zmq_ctx_term`.
///
/// Thread safety: a ZeroMQ context is thread-safe, so this class is `Sendable`.
///
/// Every socket keeps its context alive, so the context is terminated (in `deinit`) only
/// after its last socket closed. Termination never hangs: every socket is created with a
/// bounded linger (`socketLinger`), so `zmq_ctx_term` waits at most that long for
/// unsent messages.
package final class ZMQContext: @unchecked Sendable {
    /// The process-wide context, with room for 65536 sockets so that thousands of ports
    /// work (each socket also needs a descriptor or two: raise `RLIMIT_NOFILE` to match).
    /// Made by the first socket that needs it and never terminated. Throws (`EMFILE` at
    /// the descriptor limit) while it cannot be made; a later call tries again.
    package static var shared: ZMQContext {
        get throws(SystemCallError) {
            try sharedContext.withLock { context throws(SystemCallError) -> ZMQContext in
                if let context { return context }
                let made = try ZMQContext(maxSockets: 65536)
                context = made
                return made
            }
        }
    }

    private static let sharedContext = LockedValue<ZMQContext?>(nil)

    /// The `void *` context handle. Valid until `deinit`.
    package let handle: UnsafeMutableRawPointer

    /// The process that made it: in any other (a child it forked), making a socket of it
    /// throws `forkedChild`, and so does a call libzmq answers with `EINTR` (`zmqCall`).
    package let processID: pid_t

    /// The linger, in milliseconds, set with `ZMQ_LINGER` on every socket at creation:
    /// how long closing the context waits for a socket's unsent messages.
    package let socketLinger: Int32

    /// Creates a context, via `zmq_ctx_new` and `zmq_ctx_set`, and starts its threads (a
    /// socket made and closed) once the descriptors they need were seen to be free
    /// (`checkDescriptorsForStart`): `EMFILE` at the descriptor limit, never an abort.
    ///
    /// - Parameters:
    ///   - ioThreads: `ZMQ_IO_THREADS`, the threads that move tcp and ipc traffic.
    ///   - maxSockets: `ZMQ_MAX_SOCKETS`, the most sockets open at once (libzmq's
    ///     default is 1023). Must be set here: libzmq sizes its tables at the first socket.
    ///   - socketLinger: the bound on how long unsent messages are kept after a socket
    ///     closes, rounded up to whole milliseconds (at most `Int32.max`; never infinite).
    package init(
        ioThreads: Int32 = 1,
        maxSockets: Int32 = 1023,
        socketLinger: Duration = .milliseconds(100)
    ) throws(SystemCallError) {
        try ZMQContext.checkDescriptorsForStart(ioThreads: ioThreads)
        try ZMQContext.prepareAcceptGuard()
        processID = getpid()
        _ = zmqContextProcess.compareExchange(expected: 0, desired: processID, ordering: .relaxed)
        handle = try zmqCall("zmq_ctx_new") { zmq_ctx_new() }
        self.socketLinger = Int32(clamping: socketLinger.zmqMilliseconds)
        do {
            // Sockets get the bounded linger anyway; ZMQ_BLOCKY=0 also covers any socket
            // libzmq makes internally, so that termination can never block forever.
            try zmqCall("zmq_ctx_set(ZMQ_BLOCKY)") { zmq_ctx_set(handle, ZMQ_BLOCKY, 0) }
            try zmqCall("zmq_ctx_set(ZMQ_IO_THREADS)") { zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads) }
            try zmqCall("zmq_ctx_set(ZMQ_MAX_SOCKETS)") { zmq_ctx_set(handle, ZMQ_MAX_SOCKETS, maxSockets) }
            // Started now, right after the check, rather than at the first real socket.
            let first = try zmqCall("zmq_socket") { zmq_socket(handle, ZMQ_PAIR) }
            zmq_close(first)
        } catch {
            zmq_ctx_term(handle)
            throw error
        }
    }

    /// Throws `EMFILE` unless the descriptors a context takes as it starts can be had.
    ///
    /// libzmq starts a context at its first socket: a mailbox eventfd and an epoll instance
    /// for its reaper thread and for each I/O thread. A mailbox it cannot make is an error
    /// it reports (`EMFILE`), but an epoll instance it cannot make aborts the process
    /// (`errno_assert` in `epoll_t`'s constructor). So as many eventfds are opened and
    /// closed first, the context's own mailbox and the first socket's included: at the
    /// descriptor limit the context is refused with an error, not an abort. (Another thread
    /// opening descriptors between the check and the start could still take them.)
    private static func checkDescriptorsForStart(ioThreads: Int32) throws(SystemCallError) {
        // One more for the accept guard's reserve (`prepareAcceptGuard`), opened right after.
        let needed = 2 + 2 * (Int(max(ioThreads, 0)) + 1) + 1
        var opened: [Int32] = []
        defer { for fd in opened { Kernel.close(fd) } }
        for _ in 0..<needed {
            do {
                opened.append(try Kernel.eventDescriptor())
            } catch {
                throw SystemCallError(code: error.code, call: "zmq_ctx_new (\(needed) descriptors to start a context)")
            }
        }
    }

    /// Keeps libzmq's listeners away from `EMFILE` (`CAcceptGuard`): one descriptor held in
    /// reserve for the life of the process (opened by its first context), so that at the
    /// limit a listener's pending connection is accepted and closed, the client retrying
    /// later, instead of the ipc listener aborting the process or the tcp listener spinning.
    private static func prepareAcceptGuard() throws(SystemCallError) {
        _ = try systemCall("open(/, O_PATH) for the accept reserve") { rlk_accept_guard_prepare() }
    }

    deinit {
        // A forked child's copy is its parent's: libzmq's threads are not there to end.
        guard processID == getpid() else { return }
        // Cannot block for long: all sockets are closed (each holds its context) and
        // each had a bounded linger. EINTR is retried; nothing else can be done on error.
        _ = try? zmqCall("zmq_ctx_term") { zmq_ctx_term(handle) }
    }

    /// The most sockets the context allows at once (`ZMQ_MAX_SOCKETS`), via `zmq_ctx_get`.
    package var maxSockets: Int32 {
        zmq_ctx_get(handle, ZMQ_MAX_SOCKETS)
    }

    /// Makes every blocking call on the context's sockets fail with `ETERM`, and every
    /// later call too, via `zmq_ctx_shutdown`. The sockets must still be closed (released).
    package func shutdown() throws(SystemCallError) {
        try zmqCall("zmq_ctx_shutdown") { zmq_ctx_shutdown(handle) }
    }
}
