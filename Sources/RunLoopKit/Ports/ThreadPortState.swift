import Glibc

/// What ports keep per thread: the PUSH sockets this thread sends with (one per
/// destination) and its private reply port for request/reply.
///
/// A ZeroMQ socket never moves between threads, so each thread sends through sockets of
/// its own, created on first use and closed (with the context's bounded linger) when the
/// thread exits. Thread-local: only ever touched by its own thread.
final class ThreadPortState {
    /// The PUSH socket to one destination, and the address it is connected to.
    private final class Sender {
        let destination: RemotePort
        let socket: ZMQSocket
        /// The in-process alias of a named or tcp-bound port of this process, else `destination`'s address.
        let target: PortAddress

        init(destination: RemotePort, socket: ZMQSocket, target: PortAddress) {
            self.destination = destination
            self.socket = socket
            self.target = target
        }
    }

    private var senders: [RemotePort: Sender] = [:]
    /// The last destination's sender: a thread mostly sends to one port at a time, and
    /// this spares the dictionary's hashing on every send.
    private var last: Sender?
    /// The private reply port, created by the first request this thread makes.
    var replyPort: ReplyPort?

    /// The calling thread's state, created on first use.
    static var current: ThreadPortState {
        if let pointer = pthread_getspecific(key) {
            return Unmanaged<ThreadPortState>.fromOpaque(pointer).takeUnretainedValue()
        }
        let state = ThreadPortState()
        pthread_setspecific(key, Unmanaged.passRetained(state).toOpaque())
        return state
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key) { pointer in
            guard let pointer else { return }
            let state = Unmanaged<ThreadPortState>.fromOpaque(pointer).takeRetainedValue()
            state.replyPort?.port.invalidate()
            state.last = nil
            state.senders.removeAll() // closes this thread's sockets, on this thread
        }
        precondition(rc == 0, "pthread_key_create failed: \(rc)")
        return key
    }()

    /// Sends a message to `destination`, waiting until `deadline` for the peer to
    /// take it; throws `PortError.sendTimedOut` if it does not, or `remoteInvalid` as soon
    /// as an in-process port is known to be closed. Nothing is queued for a peer that is
    /// not there (`ZMQ_IMMEDIATE`), so an error means the message was not sent.
    func send(_ envelope: PortEnvelope, to destination: RemotePort, before deadline: Deadline) throws(PortError) {
        let address = destination.address
        let sender = try sender(for: destination)
        let socket = sender.socket
        let target = sender.target
        try portOperation {
            if try socket.send(envelope, dontWait: true) { return }
            while true {
                if target.isInProcess && !PortDirectory.shared.isOpen(target) {
                    senders[destination] = nil
                    last = nil
                    throw PortError.remoteInvalid(address)
                }
                let now = Deadline.now()
                guard now < deadline else { throw RunLoopKitLog.timedOut(.sendTimedOut(address)) }
                _ = try socket.poll(for: .pollOut, timeout: min(deadline - now, ThreadPortState.livenessCheckInterval))
                if try socket.send(envelope, dontWait: true) { return }
            }
        }
    }

    /// How often a blocked send to an in-process port checks that the port is still open.
    static let livenessCheckInterval = Duration.milliseconds(100)

    /// Messages queued per destination before sends wait (`ZMQ_SNDHWM`); together with the
    /// receiving port's `receiveHighWaterMark` this bounds what one sender has in flight.
    static let sendHighWaterMark: Int32 = 10_000

    private func sender(for destination: RemotePort) throws(PortError) -> Sender {
        if let last, last.destination == destination { return last }
        if let sender = senders[destination] {
            last = sender
            return sender
        }
        // Within this process, reach a named or tcp-bound port over inproc.
        let target = PortDirectory.shared.inProcessAlias(of: destination.address) ?? destination.address
        let socket: ZMQSocket
        do {
            socket = try ZMQSocket(type: .push)
            try socket.setOption(.immediate, true)
            try socket.setOption(.sendHighWaterMark, ThreadPortState.sendHighWaterMark)
            if let serverKey = destination.curveServerKey.flatMap(ZMQCurveKey.init(z85:)), !target.isInProcess {
                // A fresh client key pair per socket: the server admits whoever knows its key.
                let client = try ZMQCurve.generateKeyPair()
                try socket.setOption(.curveServerKey, serverKey)
                try socket.setOption(.curvePublicKey, client.publicKey)
                try socket.setOption(.curveSecretKey, client.secretKey)
            }
            if !target.isInProcess { try socket.connect(target.rawValue) }
        } catch {
            throw .transport(error)
        }
        if target.isInProcess { try PortDirectory.shared.connect(socket, toOpen: target) }
        let sender = Sender(destination: destination, socket: socket, target: target)
        senders[destination] = sender
        last = sender
        return sender
    }
}
