import RunLoopSystem
import CZeroMQ

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
    private let monitor: ZMQSocketMonitor

    /// Starts monitoring `watched`'s disconnections and connects the PAIR socket that
    /// receives them. The watched socket must stay open until this is released.
    package init(watching watched: ZMQSocket) throws(SystemCallError) {
        monitor = try ZMQSocketMonitor(watching: watched, events: ZMQ_EVENT_DISCONNECTED)
    }

    /// The descriptor of the next connection reported gone, if any; never waits.
    package func nextDisconnected() throws(SystemCallError) -> Int32? {
        while let reported = try monitor.nextEvent() {
            if reported.event == ZMQ_EVENT_DISCONNECTED { return Int32(bitPattern: reported.value) }
        }
        return nil
    }
}
