import RunLoopSystem
import CZeroMQ

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
    /// Never terminated.
    package static let shared: ZMQContext = {
        do {
            return try ZMQContext(maxSockets: 65536)
        } catch {
            // Without a context no port can work; this only fails when out of descriptors.
            fatalError("RunLoopKit cannot create its ZeroMQ context: \(error)")
        }
    }()

    /// The `void *` context handle. Valid until `deinit`.
    package let handle: UnsafeMutableRawPointer

    /// The linger, in milliseconds, set with `ZMQ_LINGER` on every socket at creation:
    /// how long closing the context waits for a socket's unsent messages.
    package let socketLinger: Int32

    /// Creates a context, via `zmq_ctx_new` and `zmq_ctx_set`.
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
        handle = try zmqCall("zmq_ctx_new") { zmq_ctx_new() }
        self.socketLinger = Int32(clamping: socketLinger.zmqMilliseconds)
        do {
            // Sockets get the bounded linger anyway; ZMQ_BLOCKY=0 also covers any socket
            // libzmq makes internally, so that termination can never block forever.
            try zmqCall("zmq_ctx_set(ZMQ_BLOCKY)") { zmq_ctx_set(handle, ZMQ_BLOCKY, 0) }
            try zmqCall("zmq_ctx_set(ZMQ_IO_THREADS)") { zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads) }
            try zmqCall("zmq_ctx_set(ZMQ_MAX_SOCKETS)") { zmq_ctx_set(handle, ZMQ_MAX_SOCKETS, maxSockets) }
        } catch {
            zmq_ctx_term(handle)
            throw error
        }
    }

    deinit {
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
