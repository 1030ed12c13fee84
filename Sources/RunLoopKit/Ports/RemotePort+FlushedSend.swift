import RunLoopSystem
import RunLoopZMQ

/// Sending from a program about to exit.
extension RemotePort {
    /// Sends `message` to another process's port and returns once libzmq has written it
    /// out (or `linger`, 100 ms, passed), for command-line tools that exit right after.
    ///
    /// `send` hands the message to libzmq's I/O thread and returns; the process-wide
    /// context is never terminated, so a process exiting at once could lose it. This uses a
    /// context and socket of its own and terminates them, which waits for the write.
    /// Throws as `send` does (`sendTimedOut` if the peer does not take it by `deadline`).
    /// Any thread.
    package static func sendFlushed(_ message: LoopMessage, to address: PortAddress,
                                    before deadline: Deadline) throws(PortError) {
        guard !address.isInProcess else { return try RemotePort(address).send(message, before: deadline) }
        try message.checkSize()
        let socket = try asPortError { () throws(SystemCallError) in
            let socket = try ZMQSocket(context: ZMQContext(ioThreads: 1, maxSockets: 4), type: .dealer)
            try socket.setOption(.immediate, true)
            try socket.connect(address.rawValue)
            return socket
        }
        while try !asPortError({ () throws(SystemCallError) in try socket.send(message, as: .message, dontWait: true) }) {
            let now = Deadline.now()
            guard now < deadline else { throw PortError.loggedTimeout(.sendTimedOut(address)) }
            _ = try asPortError { () throws(SystemCallError) in try socket.poll(for: .pollOut, timeout: deadline - now) }
        }
        // Released on return, the socket closes, then its context (which only it holds)
        // terminates (zmq_ctx_term), which waits for the message to be written, at most
        // the socket's linger.
    }
}
