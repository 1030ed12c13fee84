import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
import Logging

/// One thread's connection to one port: a DEALER socket connected to the port's ROUTER
/// socket (`docs/wire-format.md`). The thread's messages and requests to the port go out
/// on it, and the replies to its requests come back on it, over the same connection: the
/// port needs no way back to the requester, and keeps nothing of it once it is gone.
///
/// While a request waits for its reply the connection is a port-based source of its
/// thread's loop, in the mode its `ReplyReceiver` waits in.
///
/// A connection to another process or machine never reconnects by itself
/// (`ZMQ_RECONNECT_IVL` -1), so a peer that is gone costs no CPU; a send that finds no
/// connection to queue on connects again, at most every `retryInterval`, while it waits
/// (see `ThreadPortState.send`). Its monitor tells "gone" from "full" and reports a failed
/// security handshake.
///
/// Owned by its thread's `ThreadPortState`; thread-confined, like its socket.
final class PortConnection: PortSourceDriver, WireReceiver {
    /// Where a connection to another process stands, as its monitor last told.
    enum Link: Equatable {
        /// A connection is being made (or libzmq has not reported on it yet).
        case connecting
        /// Connected, handshake done.
        case up
        /// Lost, or the last attempt failed: connect again before waiting on it.
        case down
        /// The security handshake failed.
        case refused(ZMQHandshakeFailure)
    }

    let destination: RemotePort
    /// The in-process alias of a named or tcp-bound port of this process, else `destination`'s address.
    let target: PortAddress
    let socket: ZMQSocket
    package let pollDescriptor: Int32
    /// For a connection to another process: its monitor (released before the socket closes).
    private var monitor: ZMQConnectionMonitor?
    private(set) var link = Link.connecting
    // Its thread's alone, like the `ThreadPortState` that holds it; see architecture.md.
    /// Requests sent on it whose replies are still awaited: it is not closed while any are.
    @exclusivity(unchecked) private(set) var awaitedReplies = 0
    /// When the thread last switched to or from it (see `ThreadPortState`'s idle sweep).
    @exclusivity(unchecked) var lastUsed: Deadline
    /// Where its replies go.
    private unowned let state: ThreadPortState
    /// The loop it is a source of, while it is. Strong: the loop holds the connection
    /// (its mode's items) as long as the connection holds the loop, and both let go
    /// together, in `leaveLoop` or in the loop's teardown (`detachedFromLoop`), one of
    /// which runs at the latest when the thread exits. A weak reference cost a call into
    /// the runtime and the loop's side table at each of a request's two reads.
    @exclusivity(unchecked) private(set) var loop: ThreadRunLoop?
    /// The reply port of the last message that came back with one (replies carry none, so
    /// this stays empty but for a peer that sends one): see `ReplyAddressCache`.
    @exclusivity(unchecked) private var replyAddresses = ReplyAddressCache()

    /// How often a waiting send connects again to a peer that is not there.
    static let retryInterval = Duration.milliseconds(100)

    init(to destination: RemotePort, target: PortAddress, state: ThreadPortState) throws(PortError) {
        self.destination = destination
        self.target = target
        self.state = state
        lastUsed = .now()
        do {
            socket = try ZMQSocket(type: .dealer)
            try socket.setOption(.immediate, true)
            try socket.setOption(.sendHighWaterMark, ThreadPortState.sendHighWaterMark)
            try socket.setOption(.maxMessageSize, Int64(WireLimits.default.maxFrameBytes))
            pollDescriptor = try socket.fileDescriptor
            if !target.isInProcess {
                try socket.setOption(.reconnectInterval, -1)
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

    // MARK: - The link to another process

    /// Reads what the monitor reported since last asked; returns the link as it now stands.
    func updateLink() throws(SystemCallError) -> Link {
        guard let monitor else { return .up } // inproc: connected for as long as the port is open
        while let event = try monitor.nextEvent() {
            switch event {
            case .connected: link = .up
            case .disconnected: if case .refused = link {} else { link = .down }
            case .handshakeFailed(let failure) where failure.isConnectionClosed && destination.curveServerKey == nil:
                // No security to fail: the peer closed the connection (a server at its
                // descriptor limit drops new ones): down, connected again while a send waits.
                link = .down
            case .handshakeFailed(let failure): link = .refused(failure)
            }
        }
        return link
    }

    /// Connects again after the link went down or was refused.
    func reconnect() throws(SystemCallError) {
        // libzmq forgets an endpoint whose connection ended, so the disconnect may find none.
        do { try socket.disconnect(target.rawValue) } catch where error.code == .fileNotFound {}
        try socket.connect(target.rawValue)
        link = .connecting
    }

    /// The monitor's socket, to wait on beside the connection's own.
    var monitorSocket: ZMQSocket? { monitor?.socket }

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

    /// A request was sent on it: it becomes a source of the thread's loop in `mode`, if it
    /// is not one already, and stays open until the reply is settled.
    func awaitReply(in mode: LoopMode) {
        awaitedReplies += 1
        // A connection is its thread's, so the loop it joins is always that thread's.
        guard loop == nil else { return }
        let current = ThreadRunLoop.current
        loop = current
        current.addItem(.port(self), binding: nil, to: mode)
    }

    /// The reply to one of its requests came, timed out or was given up.
    func replySettled() {
        awaitedReplies -= 1
    }

    /// Leaves its loop, before it closes.
    func leaveLoop() {
        loop?.removeEverywhere(.port(self))
        loop = nil
    }

    package func hasPendingMessage() -> Bool {
        guard let events = try? socket.events else { return false }
        return events.contains(.pollIn)
    }

    /// A connecting DEALER: see `PortSourceDriver.canAskInsteadOfDraining`.
    package var canAskInsteadOfDraining: Bool { false }

    /// Receives one reply (or a remote handler's failure) without blocking and hands it to
    /// the thread's `ReplyReceiver`.
    package func handleOneMessage() -> PortDelivery {
        receiveOne(from: socket, decode: { (frames) throws(WireFormatError) in
            // Fresh buffers for each reply: its requester keeps it.
            var storage = ReceivedMessageStorage()
            return try PortEnvelope.decode(frames: frames, limits: .default, replyAddresses: &replyAddresses,
                                           storage: &storage)
        }, deliver: { envelope in deliverReply(envelope) })
    }

    /// Hands a reply (or failure) to the request waiting for it; anything else is dropped.
    private func deliverReply(_ envelope: PortEnvelope) -> PortDelivery {
        let awaited: Bool
        switch envelope.kind {
        case .reply:
            awaited = state.replyReceiver.received(envelope.message, for: envelope.correlationID)
        case .failure:
            let reason = envelope.message.text ?? "(no reason given)"
            awaited = state.replyReceiver.failed(.remoteHandlerFailed(destination.address, reason: reason),
                                                 for: envelope.correlationID)
        case .noReply:
            awaited = state.replyReceiver.failed(.noReply(destination.address), for: envelope.correlationID)
        case .message, .request, .cancel:
            drop(.malformed, "a \(envelope.kind) where only replies come back")
            return .dropped
        }
        guard awaited else {
            drop(.lateReply, "late, repeated or unknown reply, correlation id \(envelope.correlationID)")
            return .dropped
        }
        return .delivered
    }

    package func detachedFromLoop() {
        loop = nil
    }

    /// Drops a message that came back on the connection: counted on the loop, logged at `.debug`.
    func drop(_ reason: MessageDropReason, _ detail: @autoclosure () -> String) {
        loop?.countDroppedMessage(reason)
        RunLoopKitLog.port.debug("message dropped", metadata: [
            "connection": "\(destination)", "reason": "\(reason)", "detail": "\(detail())",
        ])
    }
}
