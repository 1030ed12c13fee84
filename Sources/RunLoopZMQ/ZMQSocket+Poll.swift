import RunLoopSystem
import CZeroMQ

/// Polling: waiting until sockets (and a plain descriptor) are ready, via `zmq_poll`.
extension ZMQSocket {
    /// Waits until the socket is ready for any of `events`, via `zmq_poll` on this one socket.
    ///
    /// - Parameter timeout: how long to wait at most, rounded up to whole milliseconds;
    ///   `nil` waits forever, zero only looks.
    /// - Returns: the events that are ready; empty when the timeout passed.
    ///
    /// Allocates nothing: a send that waits for room (`RemotePort.send`) costs no allocation.
    package func poll(for events: ZMQEvents, timeout: Duration?) throws(SystemCallError) -> ZMQEvents {
        var item = zmq_pollitem_t(socket: handle, fd: 0, events: Int16(truncatingIfNeeded: events.rawValue), revents: 0)
        try ZMQSocket.poll(&item, count: 1, timeout: timeout)
        return ZMQEvents(rawValue: Int32(item.revents))
    }

    /// Waits until any of `sockets` is ready for its events, or `descriptor` (a plain one,
    /// if given) is readable, via one `zmq_poll`.
    ///
    /// - Parameter timeout: as in `poll(for:timeout:)`.
    /// - Returns: the events ready on each socket, in order; all empty when the timeout passed.
    package static func poll(_ sockets: [(socket: ZMQSocket, events: ZMQEvents)], orReadable descriptor: Int32? = nil,
                             timeout: Duration?) throws(SystemCallError) -> [ZMQEvents] {
        var items = sockets.map {
            zmq_pollitem_t(socket: $0.socket.handle, fd: 0, events: Int16(truncatingIfNeeded: $0.events.rawValue), revents: 0)
        }
        if let descriptor { items.append(zmq_pollitem_t(socket: nil, fd: descriptor, events: Int16(ZMQ_POLLIN), revents: 0)) }
        try items.withUnsafeMutableBufferPointer { (buffer) throws(SystemCallError) in
            try poll(buffer.baseAddress!, count: buffer.count, timeout: timeout)
        }
        return items.prefix(sockets.count).map { ZMQEvents(rawValue: Int32($0.revents)) }
    }

    /// `zmq_poll` on `count` items at `items`, until one is ready or `timeout` passed.
    private static func poll(_ items: UnsafeMutablePointer<zmq_pollitem_t>, count: Int,
                             timeout: Duration?) throws(SystemCallError) {
        let deadline = timeout.map { Deadline.after($0) }
        while true {
            let ready = try zmqCall("zmq_poll") {
                // Recomputed on each try, so a retry after EINTR does not restart the timeout.
                let milliseconds = deadline.map { Int(($0 - .now()).zmqMilliseconds) } ?? -1
                return zmq_poll(items, Int32(count), milliseconds)
            }
            // libzmq's millisecond clock can end a wait up to a millisecond early: wait on
            // until the deadline, so that a timeout is never shorter than asked.
            guard ready == 0, let deadline, Deadline.now() < deadline else { break }
        }
    }
}
