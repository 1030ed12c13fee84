import RunLoopSystem
import CZeroMQ
import Glibc
import Synchronization

/// Tells which of a listening socket's connections went, by descriptor, through libzmq's
/// socket monitor (`zmq_socket_monitor` for `ZMQ_EVENT_DISCONNECTED` alone): a port learns
/// that a requester's process died or closed its connection, and with the descriptor each
/// request came in on (`ZMQSocket.receivedSourceDescriptor`) which requests were its.
///
/// libzmq's I/O thread reports a connection's end to the monitor before it closes the
/// connection's descriptor and before the watched socket hears of it, so a descriptor
/// reused by a later connection is reported gone before that connection's first message
/// can be received: whoever reads the monitor after each receive sees the events in order.
///
/// Thread safety: none; it belongs to the watched socket's thread, like the socket.
package final class ZMQDisconnectMonitor {
    /// The PAIR socket the events arrive on.
    private let socket: ZMQSocket
    private let watched: ZMQSocket
    private static let serial = Atomic<UInt64>(0)

    /// Starts monitoring `watched`'s disconnections and connects the PAIR socket that receives them.
    package init(watching watched: ZMQSocket) throws(SystemCallError) {
        let endpoint = "inproc://runloopkit.clients.\(getpid()).\(ZMQDisconnectMonitor.serial.add(1, ordering: .relaxed).newValue)"
        try zmqCall("zmq_socket_monitor") { zmq_socket_monitor(watched.handle, endpoint, ZMQ_EVENT_DISCONNECTED) }
        do {
            socket = try ZMQSocket(context: watched.context, type: .pair)
            try socket.connect(endpoint)
        } catch {
            zmq_socket_monitor(watched.handle, nil, 0)
            throw error
        }
        self.watched = watched
    }

    /// Stops monitoring; the watched socket must still be open, so its owner releases the
    /// monitor before closing it.
    deinit {
        zmq_socket_monitor(watched.handle, nil, 0)
    }

    /// The descriptor of the next connection reported gone, if any; never waits.
    package func nextDisconnected() throws(SystemCallError) -> Int32? {
        while let frames = try socket.receive(dontWait: true) {
            // Frame 0: the event (UInt16) and its value (UInt32, the descriptor), native byte order.
            guard frames.count == 2, frames[0].count == 6 else { continue }
            let event = frames[0].withUnsafeBytes { Int32($0.loadUnaligned(as: UInt16.self)) }
            guard event == ZMQ_EVENT_DISCONNECTED else { continue }
            return frames[0].withUnsafeBytes { Int32(bitPattern: $0.loadUnaligned(fromByteOffset: 2, as: UInt32.self)) }
        }
        return nil
    }
}
