import RunLoopSystem
import CZeroMQ

/// Watches a connecting socket's connections through libzmq's socket monitor
/// (`zmq_socket_monitor`): libzmq's I/O thread reports each connection made, lost or
/// refused in its security handshake to an inproc PAIR socket, which this reads without
/// blocking.
///
/// RunLoopKit's connections never reconnect by themselves (`ZMQ_RECONNECT_IVL` -1), so that
/// a peer that is gone costs nothing; a send that finds no connection to queue on asks the
/// monitor why: still connecting, gone (connect again), or refused in the handshake (a CURVE
/// port and a client without its key, or with a wrong one), which is then an error at once
/// rather than a timeout at the send's deadline.
///
/// It also tells when libzmq is done with the watched socket after `closeWatched`: a closed
/// socket's connections keep writing out its queue for at most the linger, then libzmq
/// destroys the socket, and its destructor (`~socket_base_t`, libzmq 4.3) reports
/// `ZMQ_EVENT_MONITOR_STOPPED` to the monitor. That is how a thread or process that ends
/// waits for what its sends accepted to reach the kernel (see RunLoopKit's `ExitFlush`).
///
/// Over ipc it waits longer, until the peer has read it from the kernel: libzmq's engine
/// closes its descriptor as soon as it wrote everything, and a receiving libzmq whose
/// queue is full when its peer's unix socket hangs up drops what it has not read from
/// the kernel yet (`stream_engine_base_t::in_event_internal` takes the hang-up as an I/O
/// error while its input is stopped). So `closeWatched` holds a duplicate of the
/// connection's descriptor, which keeps the socket open after libzmq's close, until
/// `SIOCOUTQ` says the peer has read everything (asked again after each of the peer's
/// reads, which a `PeerReadWatch` tells).
///
/// Thread safety: none; it belongs to the watched socket's thread, like the socket.
package final class ZMQConnectionMonitor {
    /// What the monitor reported.
    package enum Event: Equatable {
        /// A connection was made and its handshake succeeded (`ZMQ_EVENT_HANDSHAKE_SUCCEEDED`).
        case connected
        /// A connection was lost, or an attempt to make one failed (`ZMQ_EVENT_DISCONNECTED`,
        /// `ZMQ_EVENT_CLOSED`).
        case disconnected
        /// The security handshake failed (`ZMQ_EVENT_HANDSHAKE_FAILED_*`).
        case handshakeFailed(ZMQHandshakeFailure)
    }

    private let monitor: ZMQSocketMonitor
    private let watched: ZMQSocket
    /// Whether `closeWatched` closed the watched socket (monitoring then stops by itself).
    private var watchedClosed = false
    /// Whether `ZMQ_EVENT_MONITOR_STOPPED` came after `closeWatched`.
    private var stopped = false
    /// The descriptor and endpoint of the connection libzmq last reported made
    /// (`ZMQ_EVENT_CONNECTED`), until it reports it lost.
    private var connected: (descriptor: Int32, endpoint: String)?
    /// After `closeWatched`: a duplicate of an ipc connection's descriptor, held until its
    /// peer has read everything.
    private var held: Int32?

    private static let watchedEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED
        | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
        | ZMQ_EVENT_MONITOR_STOPPED | ZMQ_EVENT_CONNECTED

    /// Starts monitoring `watched`, via `zmq_socket_monitor`, and connects the PAIR socket
    /// that receives its events.
    package init(watching watched: ZMQSocket) throws(SystemCallError) {
        monitor = try ZMQSocketMonitor(watching: watched, events: ZMQConnectionMonitor.watchedEvents)
        self.watched = watched
    }

    /// Releasing it stops monitoring; the watched socket must still be open, so its owner
    /// releases the monitor first, or closed by `closeWatched`.
    deinit {
        if let held { Kernel.close(held) }
    }

    /// The PAIR socket the events arrive on.
    package var socket: ZMQSocket { monitor.socket }

    /// The next event reported, if any; never waits.
    package func nextEvent() throws(SystemCallError) -> Event? {
        while let (event, value) = try nextRawEvent() {
            switch event {
            case ZMQ_EVENT_HANDSHAKE_SUCCEEDED: return .connected
            case ZMQ_EVENT_DISCONNECTED, ZMQ_EVENT_CLOSED: return .disconnected
            default: if let failure = ZMQHandshakeFailure(event: event, value: value) { return .handshakeFailed(failure) }
            }
        }
        return nil
    }

    /// The next event as libzmq sent it (event number and value), if any; never waits.
    private func nextRawEvent() throws(SystemCallError) -> (event: Int32, value: UInt32)? {
        guard let reported = try monitor.nextEvent() else { return nil }
        switch reported.event {
        case ZMQ_EVENT_CONNECTED:
            connected = (Int32(bitPattern: reported.value), String(decoding: reported.endpoint, as: UTF8.self))
        case ZMQ_EVENT_DISCONNECTED, ZMQ_EVENT_CLOSED: connected = nil
        default: break
        }
        return (reported.event, reported.value)
    }

    // MARK: - Closing the watched socket

    /// Closes the watched socket (`ZMQSocket.close()`), giving libzmq at most `linger`
    /// (`ZMQ_LINGER`, rounded up to whole milliseconds) to write out the messages still
    /// queued on it, and returns at once; `closeCompleted()` then tells when libzmq is done
    /// with it. Its other owners must not use it again, only release it.
    package func closeWatched(linger: Duration) throws(SystemCallError) {
        guard !watchedClosed else { return }
        try watched.setOption(.linger, Int32(clamping: linger.zmqMilliseconds))
        while try nextRawEvent() != nil {} // the connection as it now stands
        holdIPCConnection()
        watchedClosed = true
        monitor.watchedClosed()
        watched.close()
    }

    /// Duplicates the descriptor of the ipc connection libzmq last reported made, if it is
    /// still that connection (a unix socket connected to the endpoint's path: libzmq may
    /// have closed it since, and the number been reused).
    private func holdIPCConnection() {
        guard let (descriptor, endpoint) = connected, endpoint.hasPrefix("ipc://"),
              let duplicate = try? Kernel.duplicate(descriptor) else { return }
        if (try? Kernel.unixPeerPath(duplicate)) == String(endpoint.dropFirst("ipc://".count)) {
            held = duplicate
        } else {
            Kernel.close(duplicate)
        }
    }

    /// After `closeWatched`: whether libzmq is done with the watched socket — every
    /// connection wrote out its queue to the kernel, or the linger passed — as its
    /// `ZMQ_EVENT_MONITOR_STOPPED` event tells. Never waits: wait on `socket` for
    /// `.pollIn` between calls.
    package func closeCompleted() throws(SystemCallError) -> Bool {
        while !stopped, let (event, _) = try nextRawEvent() {
            if event == ZMQ_EVENT_MONITOR_STOPPED { stopped = true }
        }
        guard stopped else { return false }
        if let held {
            // An error (the socket reset) means nothing more will be read.
            if let unread = try? Kernel.unreadOutgoingBytes(held), unread > 0 { return false }
            Kernel.close(held)
            self.held = nil
        }
        return true
    }

    /// After `closeCompleted()` returned false: the ipc connection whose peer's reading is
    /// all that is awaited (libzmq is done), or nil. Its peer's reads wake a `PeerReadWatch`
    /// of it; the caller then asks `closeCompleted()` again.
    package var peerAwaited: Int32? { stopped ? held : nil }
}

/// Why a security handshake failed, as libzmq's socket monitor reports it.
package struct ZMQHandshakeFailure: Sendable, Equatable, CustomStringConvertible {
    /// The monitor event (`ZMQ_EVENT_HANDSHAKE_FAILED_*`).
    package let event: Int32
    /// Its value: an `errno` for `NO_DETAIL`, a `ZMQ_PROTOCOL_ERROR_*` code for `PROTOCOL`,
    /// the ZAP status code for `AUTH`.
    package let value: UInt32

    package init?(event: Int32, value: UInt32) {
        guard event & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                       | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0 else { return nil }
        self.event = event
        self.value = value
    }

    /// Whether the peer only closed the connection, with no protocol error or refusal
    /// (`NO_DETAIL`): a CURVE client's sign of a wrong server key, and also what a server
    /// at its descriptor limit does (RunLoopKit's accept guard drops a connection there).
    package var isConnectionClosed: Bool { event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL }

    package var description: String {
        switch event {
        case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
            switch Int32(bitPattern: value) {
            case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
                "the peer uses another security mechanism (a CURVE port and a client without its key, or the reverse)"
            case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC, ZMQ_PROTOCOL_ERROR_ZMTP_KEY_EXCHANGE:
                "the CURVE key exchange failed (a wrong server key)"
            default:
                "handshake protocol error 0x\(String(value, radix: 16))"
            }
        case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
            "the peer refused authentication (status \(value))"
        default:
            // A CURVE client with a wrong server key sees the server close the connection.
            "the peer closed the connection during the security handshake (a wrong CURVE server key?)"
        }
    }
}
