import RunLoopSystem
import CZeroMQ
import Glibc
import Synchronization

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

    /// The PAIR socket the events arrive on.
    package let socket: ZMQSocket
    private let watched: ZMQSocket
    private static let serial = Atomic<UInt64>(0)

    private static let watchedEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED
        | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH

    /// Starts monitoring `watched`, via `zmq_socket_monitor`, and connects the PAIR socket
    /// that receives its events.
    package init(watching watched: ZMQSocket) throws(SystemCallError) {
        let endpoint = "inproc://runloopkit.monitor.\(getpid()).\(ZMQConnectionMonitor.serial.add(1, ordering: .relaxed).newValue)"
        try zmqCall("zmq_socket_monitor") { zmq_socket_monitor(watched.handle, endpoint, ZMQConnectionMonitor.watchedEvents) }
        do {
            socket = try ZMQSocket(context: watched.context, type: .pair)
            try socket.connect(endpoint)
        } catch {
            zmq_socket_monitor(watched.handle, nil, 0)
            throw error
        }
        self.watched = watched
    }

    /// Stops monitoring (`zmq_socket_monitor` with no endpoint); the watched socket must
    /// still be open, so its owner releases the monitor first.
    deinit {
        zmq_socket_monitor(watched.handle, nil, 0)
    }

    /// The next event reported, if any; never waits.
    package func nextEvent() throws(SystemCallError) -> Event? {
        while let frames = try socket.receive(dontWait: true) {
            // Frame 0: the event (UInt16) and its value (UInt32), native byte order; frame 1: the endpoint.
            guard frames.count == 2, frames[0].count == 6 else { continue }
            let event = frames[0].withUnsafeBytes { Int32($0.loadUnaligned(as: UInt16.self)) }
            let value = frames[0].withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 2, as: UInt32.self) }
            switch event {
            case ZMQ_EVENT_HANDSHAKE_SUCCEEDED: return .connected
            case ZMQ_EVENT_DISCONNECTED, ZMQ_EVENT_CLOSED: return .disconnected
            default: if let failure = ZMQHandshakeFailure(event: event, value: value) { return .handshakeFailed(failure) }
            }
        }
        return nil
    }
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
