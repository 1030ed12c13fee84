import RunLoopSystem
import RunLoopZMQ
import Logging

/// The link to another process: where it stands as its monitor tells (`Link`), a
/// connection lost failing the requests outstanding on it, a named port's owner looked for
/// by its name's lock, connecting again; and the monitor as a source of the loop
/// (`LinkWatch`).
extension PortConnection {
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

    /// How often a waiting send connects again to a peer that is not there.
    static let retryInterval = Duration.milliseconds(100)

    /// Reads what the monitor reported since last asked; returns the link as it now stands.
    /// A connection lost while it was up fails the requests outstanding on it.
    func updateLink() throws(SystemCallError) -> Link {
        guard let monitor else { return .up } // inproc: connected for as long as the port is open
        while let event = try monitor.nextEvent() { _ = apply(event) }
        return link
    }

    /// Takes one monitor event into the link; returns how many outstanding requests it failed.
    private func apply(_ event: ZMQConnectionMonitor.Event) -> Int {
        let wasUp = link == .up
        switch event {
        case .connected: link = .up
        case .disconnected: if case .refused = link {} else { link = .down }
        case .handshakeFailed(let failure) where failure.isConnectionClosed && destination.curveServerKey == nil:
            // No security to fail: the peer closed the connection (a server at its
            // descriptor limit drops new ones): down, connected again while a send waits.
            link = .down
        case .handshakeFailed(let failure): link = .refused(failure)
        }
        // Only a connection that was up carried requests (`ZMQ_IMMEDIATE`): an attempt that
        // failed, or an old connection's late report after a new one was made, fails none.
        guard wasUp, link != .up else { return 0 }
        return peerLost()
    }

    /// The connection was lost while up: every request outstanding on it fails at once with
    /// `remoteInvalid` (its reply can no longer come: the connection it would come back on
    /// is gone). Returns how many failed.
    private func peerLost() -> Int {
        guard awaitedReplies > 0 else { return 0 }
        RunLoopKitLog.port.debug("connection lost with replies awaited", metadata: [
            "connection": "\(destination)", "awaited": "\(awaitedReplies)",
        ])
        let failure = PortError.remoteInvalid(destination.address)
        var failed = 0
        var remaining = routes
        while remaining != 0 {
            let index = remaining.trailingZeroBitCount
            remaining &= remaining - 1
            failed += state.receiver(of: ReplyRoute(index: index)).connectionLost(self, failure)
        }
        return failed
    }

    /// Whether the owner of the named port this connects to still holds its name (its
    /// lock): true for a connection to anything but a named port of another process, or
    /// when the lock cannot be tested (that says nothing of an owner).
    func namedOwnerLives() -> Bool {
        guard let nameLockPath else { return true }
        return (try? NameLock.isHeld(path: nameLockPath)) ?? true
    }

    /// The lock file beside a named port's ipc socket (`ipc://<dir>/NAME.sock`), if there is
    /// one when the connection is made: what makes an ipc address a named port's (a foreign
    /// peer's ipc socket has none, and is never taken for a dead owner's).
    static func nameLockPath(of target: PortAddress) -> String? {
        let address = target.rawValue
        guard address.hasPrefix("ipc://"), address.hasSuffix(".sock") else { return nil }
        let path = String(address.dropFirst("ipc://".count).dropLast(".sock".count)) + ".lock"
        return (try? Kernel.status(path)) != nil ? path : nil
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

    /// The monitor's source: one event taken into the link. `.delivered` when it failed
    /// outstanding requests (so that a run that returns after a handled source returns, and
    /// a blocked `sendRequest` sees its failure), else `.dropped` (no message was handled).
    fileprivate func handleLinkEvent() -> PortDelivery {
        guard let monitor else { return .empty }
        do {
            guard let event = try monitor.nextEvent() else { return .empty }
            return apply(event) > 0 ? .delivered : .dropped
        } catch {
            RunLoopKitLog.port.debug("cannot read a connection's monitor", metadata: [
                "connection": "\(destination)", "error": "\(error)",
            ])
            return .empty
        }
    }

    fileprivate var monitorHasEvent: Bool {
        guard let events = try? monitor?.socket.events else { return false }
        return events.contains(.pollIn)
    }
}

/// A connection's monitor as a port-based source of its loop (`PortConnection`): its PAIR
/// socket's descriptor in the poll set, in the modes the connection waits for replies in,
/// so that a connection lost is seen as soon as libzmq reports it (over ipc, at once when
/// the peer dies: the kernel closes its socket). Loop thread only.
final class LinkWatch: PortBasedSource {
    /// Weak: the connection leaves the loop with its watch before it goes, and a watch
    /// asked after that (it never is) finds nothing rather than trap. Read only on a link
    /// event, never on a request's way.
    private weak var connection: PortConnection?
    let pollDescriptor: Int32

    init(_ connection: PortConnection, monitorSocket: ZMQSocket) throws(SystemCallError) {
        self.connection = connection
        pollDescriptor = try monitorSocket.fileDescriptor
    }

    func hasPendingMessage() -> Bool { connection?.monitorHasEvent ?? false }
    /// A PAIR socket over inproc keeps what it was sent until it is read.
    var canAskInsteadOfDraining: Bool { true }
    func handleOneMessage() -> PortDelivery { connection?.handleLinkEvent() ?? .empty }
    func detachedFromLoop() {}
}
