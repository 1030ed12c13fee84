import RunLoopSystem
import CZeroMQ
import Glibc
import Synchronization

/// libzmq's socket monitor (`zmq_socket_monitor`) of one socket: libzmq's I/O thread reports
/// the watched socket's events to an inproc PAIR socket, which this reads without blocking.
/// What `ZMQConnectionMonitor` and `ZMQDisconnectMonitor` both stand on.
///
/// Thread safety: none; it belongs to the watched socket's thread, like the socket.
package final class ZMQSocketMonitor {
    /// One event as libzmq reports it.
    package struct Event {
        /// The event (`ZMQ_EVENT_*`).
        package let event: Int32
        /// Its value: a descriptor, an `errno` or a protocol code, as the event says.
        package let value: UInt32
        /// The endpoint it concerns, as libzmq spells it (`ipc://…`, `tcp://…`).
        package let endpoint: [UInt8]
    }

    /// The PAIR socket the events arrive on: wait on it for `.pollIn`.
    package let socket: ZMQSocket
    private let watched: ZMQSocket
    /// Whether monitoring stops when this is released: not once the watched socket is
    /// closed (`watchedClosed()`), when libzmq has stopped it by itself.
    private var stopsOnRelease = true
    private static let serial = Atomic<UInt64>(0)

    /// Starts monitoring `watched` for `events` (a mask of `ZMQ_EVENT_*`) and connects the
    /// PAIR socket that receives them.
    package init(watching watched: ZMQSocket, events: Int32) throws(SystemCallError) {
        let endpoint = "inproc://runloopkit.monitor.\(getpid()).\(ZMQSocketMonitor.serial.add(1, ordering: .relaxed).newValue)"
        try zmqCall("zmq_socket_monitor") { zmq_socket_monitor(watched.handle, endpoint, events) }
        do {
            socket = try ZMQSocket(context: watched.context, type: .pair)
            try socket.connect(endpoint)
        } catch {
            zmq_socket_monitor(watched.handle, nil, 0)
            throw error
        }
        self.watched = watched
    }

    /// Stops monitoring (`zmq_socket_monitor` with no endpoint): the watched socket must
    /// still be open, so its owner releases the monitor before closing it, or says it
    /// closed it with `watchedClosed()`.
    deinit {
        if stopsOnRelease { zmq_socket_monitor(watched.handle, nil, 0) }
    }

    /// The watched socket was closed: libzmq stops monitoring by itself (it reports
    /// `ZMQ_EVENT_MONITOR_STOPPED` when done), and the release must not touch the socket.
    package func watchedClosed() { stopsOnRelease = false }

    /// The next event reported, if any; never waits.
    package func nextEvent() throws(SystemCallError) -> Event? {
        while let frames = try socket.receive(dontWait: true) {
            // Frame 0: the event (UInt16) and its value (UInt32), native byte order; frame 1: the endpoint.
            guard frames.count == 2, frames[0].count == 6 else { continue }
            let event = frames[0].withUnsafeBytes { Int32($0.loadUnaligned(as: UInt16.self)) }
            let value = frames[0].withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 2, as: UInt32.self) }
            return Event(event: event, value: value, endpoint: frames[1])
        }
        return nil
    }
}
