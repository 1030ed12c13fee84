import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
import Logging
import Synchronization

/// One thread's connection to one port: a DEALER socket connected to the port's ROUTER
/// socket (`docs/wire-format.md`). The thread's messages and requests to the port go out
/// on it, and the replies to its requests come back on it, over the same connection: the
/// port needs no way back to the requester, and keeps nothing of it once it is gone.
///
/// While a request waits for its reply the connection is a port-based source of its
/// thread's loop, in the mode its `ReplyReceiver` waits in; so is, for a connection to
/// another process, its monitor (`LinkWatch`), so that a connection lost (its peer died,
/// or stopped answering heartbeats) fails the requests outstanding on it at once, with
/// `PortError.remoteInvalid`, rather than at their receive timeouts.
///
/// A connection to another process or machine never reconnects by itself
/// (`ZMQ_RECONNECT_IVL` -1), so a peer that is gone costs no CPU; a send that finds no
/// connection to queue on connects again, at most every `retryInterval`, while it waits
/// (see `ThreadPortState.send`). Its monitor tells "gone" from "full" and reports a failed
/// security handshake.
///
/// Owned by its thread's `ThreadPortState`; thread-confined, like its socket.
final class PortConnection: PortBasedSource, WireReceiver {
    let destination: RemotePort
    /// The in-process alias of a named or tcp-bound port of this process, else `destination`'s address.
    let target: PortAddress
    let socket: ZMQSocket
    package let pollDescriptor: Int32
    /// For a connection to another process: its monitor (released before the socket closes).
    private(set) var monitor: ZMQConnectionMonitor?
    var link = Link.connecting
    /// For a connection to a named port of another process (`ipc://…/NAME.sock` with a
    /// `NAME.lock` beside it): the lock's path, which says whether a live owner holds the name.
    let nameLockPath: String?
    /// The monitor as a source of the loop, once a reply was awaited on a connection to
    /// another process.
    private var linkWatch: LinkWatch?
    /// The routes (`ReplyRoute.mask`) of the receivers that awaited replies on it: the
    /// connection is in each one's mode, and tells each one when it is lost.
    @exclusivity(unchecked) private(set) var routes: UInt64 = 0
    // Its thread's alone, like the `ThreadPortState` that holds it; see architecture.md.
    /// Requests sent on it whose replies are still awaited: it is not closed while any are.
    @exclusivity(unchecked) private(set) var awaitedReplies = 0
    /// When the thread last switched to or from it (see `ThreadPortState`'s idle sweep).
    @exclusivity(unchecked) var lastUsed: Deadline
    /// Where its replies go. Unowned and unchecked: the state owns its connections and
    /// closes every one (they leave the loop first) before it goes, at its thread's exit, so
    /// a connection never runs without it; checked, each reply paid a runtime call for it.
    unowned(unsafe) let state: ThreadPortState
    /// The loop it is a source of, while it is. Strong: the loop holds the connection
    /// (its mode's items) as long as the connection holds the loop, and both let go
    /// together, in `leaveLoop` or in the loop's teardown (`detachedFromLoop`), one of
    /// which runs at the latest when the thread exits. A weak reference cost a call into
    /// the runtime and the loop's side table at each of a request's two reads.
    @exclusivity(unchecked) private(set) var loop: ThreadRunLoop?
    /// The reply port of the last message that came back with one (replies carry none, so
    /// this stays empty but for a peer that sends one): see `ReplyAddressCache`.
    @exclusivity(unchecked) private var replyAddresses = ReplyAddressCache()
    /// For a connection to a port of this process (inproc): the routing id it gives itself,
    /// by which the port knows it, so that its end can be told to the port (`closed()`).
    let inProcessRoutingID: RoutingID?
    /// Whether a cancel could not be queued on it: the port may then still hold the right of
    /// a request it gave up (see `closed()`).
    private var lostACancel = false
    /// Where it stands with shared memory for large data components (its thread's alone).
    var sharedRing = SharedRingState.untried {
        didSet { if case .unavailable = sharedRing { mayShareMemory = false } }
    }
    /// Whether a large data component may go in shared memory: to a named port of another
    /// process, until its ring is unavailable. What the common message's send reads of it.
    private(set) var mayShareMemory: Bool
    /// Whether the last message sent on it was a component in its ring: any other message
    /// first clears it, fencing the notes queued since (`ThreadPortState.fenceQueuedNotes`).
    /// What the other messages' send reads of the ring.
    var followsRingComponent = false

    init(to destination: RemotePort, target: PortAddress, state: ThreadPortState) throws(PortError) {
        self.destination = destination
        self.target = target
        self.state = state
        lastUsed = .now()
        nameLockPath = PortConnection.nameLockPath(of: target)
        mayShareMemory = nameLockPath != nil
        let routingID = target.isInProcess ? PortConnection.nextInProcessRoutingID() : nil
        inProcessRoutingID = routingID
        do {
            let socket = try ZMQSocket(type: .dealer)
            self.socket = socket
            if let routingID { try socket.setOption(.routingID, routingID.withUnsafeBytes { [UInt8]($0) }) }
            try socket.setOption(.immediate, true)
            try socket.setOption(.sendHighWaterMark, ThreadPortState.sendHighWaterMark)
            try socket.setOption(.maxMessageSize, Int64(WireLimits.default.maxFrameBytes))
            pollDescriptor = try socket.fileDescriptor
            if !target.isInProcess {
                try socket.setOption(.reconnectInterval, -1)
                if target.rawValue.hasPrefix("tcp://") { try TCPKeepalive.enable(on: socket) }
                if let heartbeat = destination.effectiveHeartbeat {
                    try socket.setOption(.heartbeatInterval, Int32(clamping: heartbeat.interval.zmqMilliseconds))
                    try socket.setOption(.heartbeatTimeout, Int32(clamping: heartbeat.timeout.zmqMilliseconds))
                    try socket.setOption(.heartbeatTTL, Int32(clamping: heartbeat.ttl.zmqMilliseconds))
                }
                if let serverKey = destination.curveServerKey.flatMap(ZMQCurveKey.init(z85:)) {
                    // The sender's own key pair if it has one (allow-lists), else a fresh one per connection.
                    let client: (publicKey: ZMQCurveKey, secretKey: ZMQCurveKey)
                    if let keys = destination.clientKeys {
                        client = (keys.publicCurveKey, keys.secretCurveKey)
                    } else {
                        client = try ZMQCurve.generateKeyPair()
                    }
                    try socket.setOption(.curveServerKey, serverKey)
                    try socket.setOption(.curvePublicKey, client.publicKey)
                    try socket.setOption(.curveSecretKey, client.secretKey)
                }
                monitor = try ZMQConnectionMonitor(watching: socket)
                try socket.connect(target.rawValue)
            }
        } catch {
            throw .system(error)
        }
        if target.isInProcess { try PortDirectory.shared.connect(socket, toOpen: target) }
    }

    deinit {
        monitor = nil // stops monitoring while the socket is still open
    }

    // MARK: - An in-process requester's end

    /// The routing ids of in-process connections: 16 bytes, `R`, seven bytes drawn once per
    /// process, then a serial. Never a libzmq-made id (5 bytes, a zero first), and not to be
    /// guessed by a peer over ipc or tcp that picks its own to take one of them first.
    private static let inProcessIDPrefix: UInt64 = 0x52 | (UInt64.random(in: 0 ... .max) << 8)
    private static let inProcessIDSerial = Atomic<UInt64>(0)

    private static func nextInProcessRoutingID() -> RoutingID {
        let serial = inProcessIDSerial.add(1, ordering: .relaxed).newValue
        let words = (inProcessIDPrefix.littleEndian, serial.littleEndian)
        return withUnsafeBytes(of: words) { RoutingID($0) }
    }

    /// Its thread is done with it (the thread exits, or closes it as idle or to make room):
    /// a connection to a port of this process that may have left reply rights held there —
    /// a reply still awaited, or a cancel it could not queue — tells the port, which cancels
    /// the requests still outstanding from it (their rights report it), as a Mach reply
    /// port's death reaches the holders of its send-once rights. Every other request of it
    /// was answered or cancelled on the wire, so the port holds nothing of it and is not
    /// woken. After its last send.
    func closed() {
        guard awaitedReplies > 0 || lostACancel, let inProcessRoutingID else { return }
        lostACancel = false
        PortDirectory.shared.requesterClosed(inProcessRoutingID, connectedTo: target)
    }

    // MARK: - Closing with what it queued written out

    /// Whether it reaches another process or machine (ipc or tcp), where libzmq's I/O
    /// thread still holds what its sends queued until it is written to the kernel. (An
    /// in-process connection's messages are in the port's own queue once sent.)
    var isCrossProcess: Bool { monitor != nil }

    /// Closes the socket of a connection to another process, giving libzmq at most
    /// `linger` to write out what its sends queued, and returns its monitor, which tells
    /// when libzmq is done (`ZMQConnectionMonitor.closeCompleted()`); nil for an in-process
    /// connection, or if the linger could not be set (the socket then closes when released,
    /// with the context's linger). The connection must not be used again: its thread's
    /// state forgets it (see `ExitFlush`).
    func closeFlushing(linger: Duration) -> ZMQConnectionMonitor? {
        guard let monitor else { return nil }
        leaveLoop()
        do {
            try monitor.closeWatched(linger: linger)
        } catch {
            RunLoopKitLog.port.debug("cannot flush a connection", metadata: ["connection": "\(destination)", "error": "\(error)"])
            return nil
        }
        return monitor
    }

    // MARK: - Replies

    /// A request was sent on it, whose reply goes to `route`: it becomes a source of the
    /// thread's loop in the mode of the route's receiver, with its monitor if it reaches
    /// another process, if it is not one there already, and stays open until the reply is
    /// settled.
    @inline(__always)
    func awaitReply(route: ReplyRoute) {
        awaitedReplies += 1
        guard routes & route.mask == 0 else { return }
        join(route: route)
    }

    private func join(route: ReplyRoute) {
        let mode = state.receiver(of: route).replyMode
        // A connection is its thread's, so the loop it joins is always that thread's.
        let current = loop ?? ThreadRunLoop.current
        if let monitor, linkWatch == nil {
            // Its events are read in order from here on, those from before the request
            // included: a connection lost even before the request was registered as
            // awaited fails it (see `apply`), once the loop runs.
            linkWatch = try? LinkWatch(self, monitorSocket: monitor.socket)
        }
        routes |= route.mask
        loop = current
        current.addItem(.port(self), binding: nil, to: mode)
        if let linkWatch { current.addItem(.port(linkWatch), binding: nil, to: mode) }
    }

    /// The reply to one of its requests came, timed out or was given up.
    func replySettled() {
        awaitedReplies -= 1
    }

    /// Leaves its loop, with its monitor's source, before it closes.
    func leaveLoop() {
        // Read once: leaving its last mode calls `detachedFromLoop`, which clears `loop`.
        let current = loop
        current?.removeEverywhere(.port(self))
        if let linkWatch { current?.removeEverywhere(.port(linkWatch)) }
        loop = nil
        routes = 0
    }

    // MARK: - Cancel

    /// Tells the port that the request `correlationID` (message id `messageID`) sent on this
    /// connection was given up (a kind-4 cancel, `docs/wire-format.md`), without waiting: a
    /// cancel that cannot be queued at once (the connection is full or gone) is not sent,
    /// counted as `cancelNotSent` and logged. Returns whether it was queued.
    @discardableResult
    func sendCancel(correlationID: UInt64, messageID: Int32) -> Bool {
        let sent: Bool
        do {
            sent = try socket.sendHeaderOnly(kind: .cancel, messageID: messageID, correlationID: correlationID, dontWait: true)
        } catch {
            RunLoopKitLog.port.debug("cancel not sent", metadata: ["connection": "\(destination)", "error": "\(error)"])
            sent = false
        }
        if sent {
            self.sent()
        } else {
            PortConnection.cancelsNotSent.add(1, ordering: .relaxed)
            lostACancel = true
            RunLoopKitLog.port.debug("cancel not sent: the connection did not take it", metadata: [
                "connection": "\(destination)", "correlationID": "\(correlationID)",
            ])
        }
        return sent
    }

    /// Cancels that could not be queued, in this process (for tests and diagnostics).
    static let cancelsNotSent = Atomic<Int>(0)

    /// After a send on its socket: the loop it waits for replies in (if any) asks
    /// `ZMQ_EVENTS` now, since the send may have taken the edge of `ZMQ_FD`. A method, so
    /// that the connection goes to the loop as `self`, lent, not retained and released
    /// around the call as its caller's local was.
    func sent() {
        loop?.sentOnOwnThreadsPortSource(self)
    }

    package func hasPendingMessage() -> Bool {
        guard let events = try? socket.events else { return false }
        return events.contains(.pollIn)
    }

    /// A connecting DEALER: see `PortBasedSource.canAskInsteadOfDraining`.
    package var canAskInsteadOfDraining: Bool { false }

    /// Receives one reply (or a remote handler's failure) without blocking and hands it to
    /// the thread's `ReplyReceiver`.
    package func handleOneMessage() -> PortDelivery {
        receiveOne(from: socket, decode: { (frames) throws(WireFormatError) in
            // Fresh buffers for each reply: its requester keeps it.
            var storage = ReceivedMessageStorage()
            return try PortEnvelope.decode(frames: frames, limits: .default, replyAddresses: &replyAddresses,
                                           storage: &storage)
        }, taking: { envelope in deliverReply(&envelope) })
    }

    /// Hands a reply (or failure) to the request waiting for it; anything else is dropped.
    /// A reply is taken out of the envelope, so that it moves to its receiver uncopied.
    private func deliverReply(_ envelope: inout PortEnvelope) -> PortDelivery {
        let awaited: Bool
        let id = envelope.correlationID
        switch envelope.kind {
        case .reply:
            let reply = envelope.takeMessage()
            // The request's own route, read from its id; `sendRequest`'s list called directly.
            if ReplyRoute.index(of: id) == 0 {
                awaited = state.pendingReplies.received(reply, for: id)
            } else {
                awaited = state.receiver(of: id)?.received(reply, for: id) ?? false
            }
        case .failure:
            let reason = envelope.message.text ?? "(no reason given)"
            awaited = state.receiver(of: id)?.failed(.remoteHandlerFailed(destination.address, reason: reason), for: id) ?? false
        case .noReply:
            awaited = state.receiver(of: id)?.failed(.noReply(destination.address), for: id) ?? false
        case .message, .request, .cancel:
            drop(.malformed, "a \(envelope.kind) where only replies come back")
            return .dropped
        }
        guard awaited else {
            drop(.lateReply, "late, repeated or unknown reply, correlation id \(id)")
            return .dropped
        }
        return .delivered
    }

    package func detachedFromLoop() {
        loop = nil
        routes = 0
    }

    /// Drops a message that came back on the connection: counted on the loop, logged at `.debug`.
    func drop(_ reason: MessageDropReason, _ detail: @autoclosure () -> String) {
        loop?.countDroppedMessage(reason)
        RunLoopKitLog.port.debug("message dropped", metadata: [
            "connection": "\(destination)", "reason": "\(reason)", "detail": "\(detail())",
        ])
    }
}
