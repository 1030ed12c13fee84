import Glibc
import RunLoopSystem

/// The receiving end of a port's descriptor side channel: a unix `SOCK_SEQPACKET` listener
/// beside the port's ipc socket, whose descriptor (`descriptor`) sits in the loop's poll
/// set. It accepts connections of this user only (`SO_PEERCRED`), reads every packet
/// queued without waiting (`drain()`), and keeps each `attach` packet's descriptors under
/// its token and the sending process, until the ZeroMQ message that names them takes them
/// (`take(_:from:)`). What no message takes is bounded per connection and closed.
///
/// Thread safety: none; the port's loop thread's.
package final class DescriptorReceiver {
    /// What the receiver dropped or refused, for the port's statistics.
    package struct Counters: Equatable, Sendable {
        /// Descriptors delivered to messages.
        package var taken = 0
        /// Descriptors closed unclaimed: over a connection's bound, revoked, orphaned by a
        /// closed connection, in a malformed packet, or left at `invalidate()`.
        package var closedUnclaimed = 0
        /// Messages whose token matched nothing from their sender (forged, unknown, or
        /// another process's).
        package var unknownTokens = 0
        /// Connections refused: another user's process.
        package var connectionsRefused = 0
        /// Packets that were not the side channel's (dropped with their descriptors).
        package var malformedPackets = 0
    }

    private struct Entry {
        let pid: pid_t
        let connection: Int32
        let descriptors: [MessageDescriptor]
        /// When its connection closed (it waits for its message a grace period), or nil.
        var orphanedAt: Deadline?
    }

    private struct Connection {
        let pid: pid_t
        var unclaimed = 0
    }

    /// The listener, readable when a connection is pending; connections are read at each `drain()`.
    package let descriptor: Int32
    package let path: String
    /// The most descriptors one connection may have waiting for their messages.
    package let maxUnclaimedPerConnection: Int
    package private(set) var counters = Counters()
    private var connections: [Int32: Connection] = [:]
    private var entries: [DescriptorToken: Entry] = [:]
    private let uid = getuid()

    /// Listens at `path` (replacing nothing: `addressInUse` if something is there).
    package init(path: String, maxUnclaimedPerConnection: Int = 1024) throws(SystemCallError) {
        let fd = try Kernel.unixPacketSocket()
        do {
            try Kernel.listen(fd, atUnixPath: path, backlog: 128)
        } catch {
            Kernel.close(fd)
            throw error
        }
        descriptor = fd
        self.path = path
        self.maxUnclaimedPerConnection = maxUnclaimedPerConnection
    }

    deinit { invalidate() }

    /// Descriptors waiting for their messages.
    package var unclaimedCount: Int { entries.values.reduce(0) { $0 + $1.descriptors.count } }

    /// How long descriptors whose connection closed (their sender exited or was killed)
    /// wait for their message: it may still be in the port's ZeroMQ queue. Past it, the
    /// next `drain()` closes them.
    package var orphanGrace = Duration.seconds(10)

    /// Accepts every pending connection and reads every packet queued on every connection,
    /// without waiting; then closes the orphans past their grace (`orphanGrace`).
    package func drain() {
        guard !isInvalidated else { return }
        defer { closeExpiredOrphans() }
        acceptPending()
        for fd in Array(connections.keys) {
            while readOne(fd) {}
        }
    }

    /// Reads packets until `token` is there, one per connection in turn (so that no
    /// connection's packets pile up here ahead of their messages), or until none is queued.
    private func read(until token: DescriptorToken) {
        guard !isInvalidated else { return }
        defer { closeExpiredOrphans() }
        acceptPending()
        var progress = true
        while progress, entries[token] == nil {
            progress = false
            for fd in Array(connections.keys) where readOne(fd) {
                progress = true
                if entries[token] != nil { break }
            }
        }
        readClosedConnections()
    }

    /// Reads to the end the connections whose sender closed them (it exited or was
    /// killed): what they attached becomes orphans, which wait `orphanGrace` for their
    /// messages. Live connections are read no further than their messages need.
    private func readClosedConnections() {
        guard !connections.isEmpty, let closed = try? Kernel.hungUp(Array(connections.keys)) else { return }
        for fd in closed {
            while readOne(fd) {}
        }
    }

    /// Accepts every pending connection of this user; refuses (closes) any other's.
    private func acceptPending() {
        while let connection = try? Kernel.accept(descriptor) {
            guard let credentials = try? Kernel.peerCredentials(connection), credentials.uid == uid else {
                counters.connectionsRefused += 1
                Kernel.close(connection)
                continue
            }
            connections[connection] = Connection(pid: credentials.pid)
        }
    }

    /// Reads one packet of connection `fd`: false when none was queued, or the connection
    /// closed (or failed) and is gone.
    private func readOne(_ fd: Int32) -> Bool {
        var buffer = (UInt64(0), UInt64(0), UInt64(0)) // DescriptorPacket.size bytes, on the stack
        let packet: ReceivedPacket?
        do {
            packet = try withUnsafeMutableBytes(of: &buffer) { bytes throws(SystemCallError) in
                try Kernel.receiveWithDescriptors(fd, into: bytes)
            }
        } catch {
            closeConnection(fd)
            return false
        }
        guard let packet else { return false }
        if packet.byteCount == 0, packet.descriptors.isEmpty {
            closeConnection(fd)
            return false
        }
        withUnsafeBytes(of: &buffer) { bytes in accept(packet, bytes: Array(bytes.prefix(packet.byteCount))[...], on: fd) }
        return true
    }

    private func accept(_ packet: ReceivedPacket, bytes: ArraySlice<UInt8>, on fd: Int32) {
        guard !packet.truncated, let (operation, token) = DescriptorPacket.decode(bytes),
              var connection = connections[fd] else {
            counters.malformedPackets += 1
            closeUnclaimed(packet.descriptors)
            return
        }
        switch operation {
        case .attach:
            guard !packet.descriptors.isEmpty, entries[token] == nil,
                  connection.unclaimed + packet.descriptors.count <= maxUnclaimedPerConnection else {
                closeUnclaimed(packet.descriptors)
                return
            }
            entries[token] = Entry(pid: connection.pid, connection: fd,
                                   descriptors: packet.descriptors.map(MessageDescriptor.init(adopting:)))
            connection.unclaimed += packet.descriptors.count
            connections[fd] = connection
        case .revoke:
            closeUnclaimed(packet.descriptors)
            if let entry = entries[token], entry.connection == fd, let descriptors = remove(token) {
                counters.closedUnclaimed += descriptors.count
                descriptors.forEach { $0.close() }
            }
        }
    }

    private func closeUnclaimed(_ descriptors: [Int32]) {
        counters.closedUnclaimed += descriptors.count
        descriptors.forEach(Kernel.close)
    }

    private func remove(_ token: DescriptorToken) -> [MessageDescriptor]? {
        guard let entry = entries.removeValue(forKey: token) else { return nil }
        if entry.orphanedAt == nil { connections[entry.connection]?.unclaimed -= entry.descriptors.count }
        return entry.descriptors
    }

    private func closeConnection(_ fd: Int32) {
        guard connections.removeValue(forKey: fd) != nil else { return }
        Kernel.close(fd)
        let now = Deadline.now()
        for (token, entry) in entries where entry.connection == fd && entry.orphanedAt == nil {
            entries[token]?.orphanedAt = now
        }
    }

    /// The descriptors that process `pid` attached under `token`, now the caller's; nil
    /// (counted in `unknownTokens`) if that process attached none under it. Reads the
    /// connections first when the token is not there yet, until it is (`read(until:)`): a
    /// sender's descriptors are queued here before its ZeroMQ message is sent.
    package func take(_ token: DescriptorToken, from pid: pid_t) -> [MessageDescriptor]? {
        if entries[token] == nil { read(until: token) }
        guard let entry = entries[token], entry.pid == pid, let descriptors = remove(token) else {
            counters.unknownTokens += 1
            return nil
        }
        counters.taken += descriptors.count
        return descriptors
    }

    /// Closes the orphans whose grace is over.
    private func closeExpiredOrphans() {
        guard orphanCount > 0 else { return }
        let now = Deadline.now()
        for (token, entry) in entries {
            if let orphaned = entry.orphanedAt, !(now < orphaned + orphanGrace), let descriptors = remove(token) {
                counters.closedUnclaimed += descriptors.count
                descriptors.forEach { $0.close() }
            }
        }
    }

    /// Entries whose connection closed, waiting for their message.
    private var orphanCount: Int { entries.values.reduce(0) { $0 + ($1.orphanedAt == nil ? 0 : 1) } }

    /// Closes the descriptors whose connection closed before `cutoff` and that no message
    /// took: a sender killed between its `attach` and its message, or whose message was lost.
    package func closeOrphans(before cutoff: Deadline) {
        for (token, entry) in entries {
            if let orphaned = entry.orphanedAt, orphaned < cutoff, let descriptors = remove(token) {
                counters.closedUnclaimed += descriptors.count
                descriptors.forEach { $0.close() }
            }
        }
    }

    /// Closes the listener, every connection and every descriptor waiting, and removes
    /// the path. Idempotent.
    package func invalidate() {
        guard !isInvalidated else { return }
        isInvalidated = true
        for token in Array(entries.keys) {
            let descriptors = remove(token) ?? []
            counters.closedUnclaimed += descriptors.count
            descriptors.forEach { $0.close() }
        }
        for fd in connections.keys { Kernel.close(fd) }
        connections = [:]
        Kernel.close(descriptor)
        if getpid() == owner { try? Kernel.unlink(path) } // a forked child's: the parent's file
    }

    /// The process that made the listener (a forked child's copy removes no file).
    private let owner = getpid()

    private var isInvalidated = false
}

/// Where a port keeps its `DescriptorReceiver` once it is named (`LocalPort.descriptorSlot`).
///
/// Thread safety: none; the port's owner thread's.
final class DescriptorReceiverSlot {
    var receiver: DescriptorReceiver?
}
