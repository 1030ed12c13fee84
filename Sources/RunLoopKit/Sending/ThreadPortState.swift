import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
import Glibc

/// What ports keep per thread: its connections to the ports it sends to (one DEALER
/// socket per destination, `PortConnection`), and where the replies to its requests go.
///
/// A ZeroMQ socket never moves between threads, so each thread sends through sockets of
/// its own, created on first use. They are bounded: at most `maxConnections` per thread
/// (the least recently used idle one is closed to make room), and one unused for
/// `idleLimit` is closed when the thread next opens a connection; all close when the
/// thread exits, which first waits, at most `RemotePort.exitFlushLimit`, until what its
/// sends to other processes queued is written out (`ExitFlush`; so does the thread that
/// ends the process). A connection with a reply still awaited is never closed before it
/// is settled.
///
/// Thread-local: only ever touched by its own thread (so the fields read on every send and
/// request skip exclusivity checks: see architecture.md).
final class ThreadPortState {
    private var connections: [RemotePort: PortConnection] = [:]
    /// Connections to named ports' descriptor side channels, by path, made at the first
    /// message with descriptors to each.
    var descriptorSenders: [String: DescriptorSender] = [:]
    /// The last destination's connection: a thread mostly sends to one port at a time, and
    /// this spares the dictionary's hashing on every send. Unretained: it is always one of
    /// `connections`, which holds it (every assignment takes it from there, and `close`
    /// clears it), so that a plain send can borrow it (`sendMessage`).
    @exclusivity(unchecked) private var lastRef: Unmanaged<PortConnection>?
    private var last: PortConnection? {
        get { lastRef?.takeUnretainedValue() }
        set { lastRef = newValue.map(Unmanaged.passUnretained) }
    }
    /// The correlation id of this thread's last request.
    @exclusivity(unchecked) private var lastCorrelationID: UInt64 = 0
    /// When idle connections are next looked for.
    private var nextSweep = Deadline.now()
    /// Where the replies to `RemotePort.sendRequest`'s requests go: route 0.
    let pendingReplies = PendingReplies()
    /// The other receivers of this thread's replies, by route (route `n` is element `n - 1`):
    /// an `AsyncRequester`'s table, on its thread. A receiver is never removed.
    private var receivers: [any ReplyReceiver] = []

    /// The process the state was made in: in a child it forked, its connections are the
    /// parent's, whose libzmq state did not survive the fork.
    private let processID = getpid()

    /// The most connections a thread keeps open.
    var maxConnections = 64
    /// How long an unused connection stays open.
    var idleLimit = Duration.seconds(30)

    /// The calling thread's state, created on first use.
    static var current: ThreadPortState {
        if let pointer = pthread_getspecific(key) {
            return Unmanaged<ThreadPortState>.fromOpaque(pointer).takeUnretainedValue()
        }
        let state = ThreadPortState()
        pthread_setspecific(key, Unmanaged.passRetained(state).toOpaque())
        return state
    }

    /// Runs `body` with the calling thread's state (made on first use), lent without a
    /// retain and a release: the thread's key holds it until the thread exits, which
    /// cannot happen during the call. For the sends and requests, where that pair would be
    /// two of the few atomic operations on a message's whole way.
    @inline(__always) @discardableResult
    static func withCurrent<Value>(_ body: (ThreadPortState) throws(PortError) -> Value) throws(PortError) -> Value {
        guard let pointer = pthread_getspecific(key) else { return try body(current) }
        var failure: PortError?
        let value: Value? = Unmanaged<ThreadPortState>.fromOpaque(pointer)._withUnsafeGuaranteedRef { state in
            do throws(PortError) { return try body(state) } catch { failure = error; return nil }
        }
        if let failure { throw failure }
        return value.unsafelyUnwrapped
    }

    /// The calling thread's state if it has one; none is made.
    static var existing: ThreadPortState? {
        pthread_getspecific(key).map { Unmanaged<ThreadPortState>.fromOpaque($0).takeUnretainedValue() }
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key) { pointer in
            guard let pointer else { return }
            let state = Unmanaged<ThreadPortState>.fromOpaque(pointer).takeRetainedValue()
            state.closeAllFlushing(at: .threadExit) // on this thread, where the sockets belong
        }
        precondition(rc == 0, "pthread_key_create failed: \(rc)")
        return key
    }()

    /// The number of open connections (for tests and introspection).
    var connectionCount: Int { connections.count }

    // MARK: - Sending

    /// Sends a message to `destination`, waiting until `deadline` for the peer to take it;
    /// throws `PortError.sendTimedOut` if it does not, `remoteInvalid` as soon as an
    /// in-process port is known to be closed, `authenticationFailed` as soon as the
    /// security handshake fails, or `messageTooLarge` at once for a message the port
    /// would refuse. Nothing is queued for a peer that is not there
    /// (`ZMQ_IMMEDIATE`), so an error means the message was not sent.
    func send(_ message: LoopMessage, to destination: RemotePort, before deadline: Deadline) throws(PortError) {
        try sendMessage(message, to: destination) { deadline }
    }

    /// Sends a message as `send(_:to:before:)` does, waiting at most `timeout` once it
    /// could not be queued at once: a message queued at once reads no clock.
    func send(_ message: some OutgoingMessage, to destination: RemotePort, within timeout: Duration) throws(PortError) {
        try sendMessage(message, to: destination) { .after(timeout) }
    }

    /// A plain message's send. To the last destination's connection, when it shares no
    /// memory (so that nothing on the way opens or closes a connection but the slow path,
    /// which holds its own reference), the connection is lent from `lastRef` rather than
    /// retained and released around the send. (hot-path: borrow-not-copy (docs/optimization-tips.md))
    @inline(__always)
    private func sendMessage(_ message: some OutgoingMessage, to destination: RemotePort,
                             deadline: () -> Deadline) throws(PortError) {
        if let lastRef, lastRef._withUnsafeGuaranteedRef({ !$0.mayShareMemory && $0.destination == destination }),
           try !message.checkSize() {
            var failure: PortError?
            lastRef._withUnsafeGuaranteedRef { connection in
                do throws(PortError) {
                    try sendPlain(message, as: .message, correlationID: 0, on: connection, deadline: deadline)
                } catch {
                    failure = error
                }
            }
            if let failure { throw failure }
            return
        }
        _ = try send(message, as: .message, correlationID: 0, to: destination, deadline: deadline)
    }

    /// Sends a message of id `id` with one data component of `byteCount` bytes (checked by
    /// the caller: 1 up to the wire's limit) that `fill` writes in place, in the frames
    /// libzmq sends, as `send(_:to:within:)` sends: `fill` runs once, before the first
    /// attempt, and returns false if it failed: then nothing is sent. The frames are
    /// released however the send ends.
    func send(id: Int32, byteCount: Int, to destination: RemotePort, within timeout: Duration,
              filling fill: (UnsafeMutableRawBufferPointer) -> Bool) throws(PortError) {
        let connection = try connection(to: destination)
        if connection.mayShareMemory, byteCount >= SharedRingLayout.gate, byteCount <= SharedRingLayout.largestComponent,
           let (ring, channel) = sharedRing(on: connection) {
            switch try sendShared(id: id, byteCount: byteCount, as: .message, correlationID: 0, in: ring, channel: channel,
                                  on: connection, to: destination, deadline: { .after(timeout) }, filling: fill) {
            case .sent, .notFilled: return
            case .notShared: break
            }
        }
        if connection.followsRingComponent { try fenceQueuedNotes(on: connection, to: destination, deadline: { .after(timeout) }) }
        let socket = connection.socket
        try withUnsafeTemporaryAllocation(of: ZMQSocket.FrameSlot.self, capacity: 2) { frames throws(PortError) in
            let frames = frames.baseAddress.unsafelyUnwrapped
            let (message, bytes) = try asPortError { () throws(SystemCallError) in
                try socket.prepareFilledMessage(frames, id: id, byteCount: byteCount)
            }
            defer { message.release() }
            guard fill(bytes) else { return }
            _ = try send(message, as: .message, correlationID: 0, to: destination) { .after(timeout) }
        }
    }

    private func send(_ message: some OutgoingMessage, as kind: WireKind, correlationID: UInt64, to destination: RemotePort,
                      deadline: () -> Deadline) throws(PortError) -> PortConnection {
        if try message.checkSize(), let message = message as? LoopMessage {
            return try sendCarryingDescriptors(message, as: kind, correlationID: correlationID, to: destination,
                                               deadline: deadline)
        }
        let connection = try connection(to: destination)
        if connection.mayShareMemory, // one load on the common message's way
           try sentShared(message, as: kind, correlationID: correlationID, on: connection, to: destination, deadline: deadline) {
            return connection
        }
        try sendPlain(message, as: kind, correlationID: correlationID, on: connection, deadline: deadline)
        return connection
    }

    /// The send proper, over ZeroMQ on `connection`: at once if it can be queued, else
    /// waiting (`waitAndSend`); then the connection's loop, if any, looks at its socket.
    @inline(__always)
    private func sendPlain(_ message: some OutgoingMessage, as kind: WireKind, correlationID: UInt64,
                           on connection: PortConnection, deadline: () -> Deadline) throws(PortError) {
        if try !asPortError({ () throws(SystemCallError) in
            try message.send(on: connection.socket, as: kind, correlationID: correlationID, dontWait: true)
        }) {
            try waitAndSend(message, as: kind, correlationID: correlationID, on: connection, before: deadline())
        }
        connection.sent()
    }

    /// `send(_:as:correlationID:to:deadline:)` for the shared ring's extension (a note, or a
    /// component it sends plain after all): the hot send stays private, so that the
    /// optimizer keeps it whole in its callers here.
    func sendFromRing(_ message: some OutgoingMessage, as kind: WireKind, correlationID: UInt64, to destination: RemotePort,
                      deadline: () -> Deadline) throws(PortError) {
        _ = try send(message, as: kind, correlationID: correlationID, to: destination, deadline: deadline)
    }

    /// This thread's connection to `destination`, made if needed (tests of the shared ring).
    func existingOrNewConnection(to destination: RemotePort) throws(PortError) -> PortConnection {
        try connection(to: destination)
    }

    /// Sends a request to `destination` (as `send` does) with a fresh correlation id that
    /// names where its reply goes, `route` (`CFMessagePortSendRequest`'s reply mode); the
    /// connection then waits for its reply in that receiver's mode until the caller
    /// settles it (`PortConnection.replySettled()`). `deadline` is read only if the request
    /// cannot be queued at once, as in `send(_:to:within:)`: a request queued at once reads
    /// no clock for it.
    func sendRequest(_ message: LoopMessage, to destination: RemotePort, replyTo route: ReplyRoute,
                     before deadline: @autoclosure () -> Deadline) throws(PortError)
        -> (correlationID: UInt64, connection: PortConnection) {
        lastCorrelationID &+= 1
        let id = route.correlationID(lastCorrelationID)
        let connection = try send(message, as: .request, correlationID: id, to: destination, deadline: deadline)
        connection.awaitReply(route: route)
        return (id, connection)
    }

    // MARK: - Where replies go

    /// Makes `receiver` a destination of this thread's replies: requests sent with the route
    /// returned have their replies (and failures) handed to it. The thread keeps it for as
    /// long as it lives. At most `ReplyRoute.maxIndex` receivers a thread.
    func route(to receiver: any ReplyReceiver) -> ReplyRoute {
        precondition(receivers.count < ReplyRoute.maxIndex, "too many reply receivers on one thread")
        receivers.append(receiver)
        return ReplyRoute(index: receivers.count)
    }

    /// The receiver the reply to `correlationID` goes to, read from the route the id
    /// carries; nil for an id that names none (a peer's forgery: dropped as late).
    @inline(__always)
    func receiver(of correlationID: UInt64) -> (any ReplyReceiver)? {
        let index = ReplyRoute.index(of: correlationID)
        if index == 0 { return pendingReplies }
        return index <= receivers.count ? receivers[index - 1] : nil
    }

    /// The receiver of `route`.
    func receiver(of route: ReplyRoute) -> any ReplyReceiver {
        route.isWaiting ? pendingReplies : receivers[route.index - 1]
    }

    /// The slow path of `send`: the message could not be queued at once.
    private func waitAndSend(_ message: some OutgoingMessage, as kind: WireKind, correlationID: UInt64,
                             on connection: PortConnection, before deadline: Deadline) throws(PortError) {
        // Held here: this path may close the connection, which a plain send only lent.
        let held = Unmanaged.passRetained(connection)
        defer { held.release() }
        let address = connection.destination.address
        var lastConnect: Deadline?
        while true {
            if connection.target.isInProcess && !PortDirectory.shared.isOpen(connection.target) {
                close(connection)
                throw PortError.remoteInvalid(address)
            }
            // A named port whose owner is gone: its name's lock says so at once.
            if !connection.namedOwnerLives() {
                close(connection)
                throw PortError.remoteInvalid(address)
            }
            switch try asPortError(connection.updateLink) {
            case .refused(let failure) where lastConnect != nil:
                throw PortError.handshakeFailed(address, failure) // notAuthorized for a ZAP 400 (security)
            case .down, .refused:
                let now = Deadline.now()
                if lastConnect.map({ now - $0 >= PortConnection.retryInterval }) ?? true {
                    try asPortError(connection.reconnect)
                    lastConnect = now
                }
            case .connecting, .up:
                break
            }
            let now = Deadline.now()
            guard now < deadline else { throw PortError.loggedTimeout(.sendTimedOut(address)) }
            let slice = min(deadline - now, ThreadPortState.livenessCheckInterval)
            let sent = try asPortError { () throws(SystemCallError) -> Bool in
                if let monitor = connection.monitorSocket {
                    _ = try ZMQSocket.poll([(connection.socket, .pollOut), (monitor, .pollIn)], timeout: slice)
                } else {
                    _ = try connection.socket.poll(for: .pollOut, timeout: slice)
                }
                return try message.send(on: connection.socket, as: kind, correlationID: correlationID, dontWait: true)
            }
            if sent { return }
        }
    }

    /// `send(_:as:correlationID:to:deadline:)` for the descriptors' extension: the message
    /// naming its descriptors' token (`sendCarryingDescriptors`). The hot send stays private,
    /// as for `sendFromRing`.
    func sendNamingDescriptors(_ message: DescriptorCarryingMessage, as kind: WireKind, correlationID: UInt64,
                               to destination: RemotePort, deadline: () -> Deadline) throws(PortError) -> PortConnection {
        try send(message, as: kind, correlationID: correlationID, to: destination, deadline: deadline)
    }

    /// How often a blocked send checks that an in-process port is still open, and that a
    /// connection to another process is still being made.
    static let livenessCheckInterval = Duration.milliseconds(100)

    /// Messages queued per destination before sends wait (`ZMQ_SNDHWM`); together with the
    /// receiving port's `receiveHighWaterMark` this bounds what one sender has in flight.
    static let sendHighWaterMark: Int32 = 10_000

    // MARK: - Connections

    private func connection(to destination: RemotePort) throws(PortError) -> PortConnection {
        if let last, last.destination == destination { return last }
        let now = Deadline.now()
        last?.lastUsed = now
        if let connection = connections[destination] {
            connection.lastUsed = now
            last = connection
            return connection
        }
        makeRoom(now)
        // Within this process, reach a named or tcp-bound port over inproc.
        let target = PortDirectory.shared.inProcessAlias(of: destination.address) ?? destination.address
        let connection = try PortConnection(to: destination, target: target, state: self)
        if connection.isCrossProcess { ExitFlush.registerExitHandler() }
        connections[destination] = connection
        last = connection
        return connection
    }

    /// Before a connection opens: closes those unused for `idleLimit` (looked for at most
    /// every half of it), then, at `maxConnections`, the least recently used idle ones.
    private func makeRoom(_ now: Deadline) {
        if now >= nextSweep {
            nextSweep = now + idleLimit / 2
            for connection in connections.values where isIdle(connection) && now - connection.lastUsed >= idleLimit {
                close(connection)
            }
        }
        while connections.count >= maxConnections,
              let oldest = connections.values.filter(isIdle).min(by: { $0.lastUsed < $1.lastUsed }) {
            close(oldest)
        }
    }

    /// Whether `connection` may be closed: no reply is awaited on it. (The thread is
    /// between sends when it opens a connection, so none is in use.)
    private func isIdle(_ connection: PortConnection) -> Bool {
        connection.awaitedReplies == 0
    }

    func close(_ connection: PortConnection) {
        connection.leaveLoop()
        connection.closed()
        connections[connection.destination] = nil
        if last === connection { last = nil }
    }

    /// Closes every connection, at the thread's exit or the process's: those to other
    /// processes once what they queued is written out, waiting at most
    /// `RemotePort.exitFlushLimit` for all of them (`ExitFlush`).
    /// In a forked child it only lets go of them, touching none: their sockets are never
    /// closed (libzmq's threads are not there to close them), and the child sends nothing.
    func closeAllFlushing(at occasion: ExitFlush.Occasion) {
        guard processID == getpid() else {
            for connection in connections.values { _ = Unmanaged.passRetained(connection) }
            last = nil
            connections.removeAll()
            return
        }
        last = nil
        let all = Array(connections.values)
        for connection in all {
            connection.leaveLoop()
            connection.closed() // a port of this process learns its requester is gone
        }
        connections.removeAll()
        ExitFlush.close(all, at: occasion)
    }
}
