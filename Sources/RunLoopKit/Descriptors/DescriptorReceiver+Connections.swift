import Glibc
import RunLoopCore
import RunLoopSystem

/// The side channel's connections: those of this user accepted (`SO_PEERCRED`), their
/// packets read without waiting into the descriptors waiting for their messages
/// (`attach`, within a connection's bound; `revoke`), and a connection whose sender is
/// gone closed, what it attached left as orphans.
extension DescriptorReceiver {
    /// Accepts every pending connection and reads every packet queued on every connection,
    /// without waiting; then closes the orphans past their grace (`orphanGrace`).
    package func drain() {
        guard !isInvalidated else { return }
        defer { closeDue() }
        acceptPending()
        for fd in Array(connections.keys) {
            while readOne(fd) {}
        }
    }

    /// Reads packets until `token` is there, one per connection in turn (so that no
    /// connection's packets pile up here ahead of their messages), or until none is queued.
    func read(until token: DescriptorToken) {
        guard !isInvalidated else { return }
        defer { closeDue() }
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

    /// Accepts every pending connection of this user; refuses (closes) any other's. An
    /// accept that fails (`EMFILE`) takes the listener out of the poll set, which would
    /// report it again at once, until the next `take`, `drain()` or timer.
    func acceptPending() {
        while true {
            let accepted: Int32?
            do {
                accepted = try Kernel.accept(descriptor)
            } catch where error.code == .interrupted || error.errno == ECONNABORTED {
                continue
            } catch {
                if let watch = listenerWatch {
                    unwatch(watch)
                    listenerWatch = nil
                    RunLoopKitLog.port.debug("descriptor side channel: accept failed, not watched until the next message",
                                             metadata: ["path": "\(path)", "error": "\(error)"])
                }
                return
            }
            guard let connection = accepted else { break }
            guard let credentials = try? Kernel.peerCredentials(connection), credentials.uid == uid else {
                counters.connectionsRefused += 1
                Kernel.close(connection)
                continue
            }
            connections[connection] = Connection(pid: credentials.pid, sender: MessageSenderBox(
                .process(uid: credentials.uid, gid: credentials.gid, pid: credentials.pid)))
            watchHangUp(of: connection)
            // This port maps shared rings: a sender may give it one (best effort; a fresh
            // connection's queue is empty).
            _ = try? DescriptorPacket.welcome.withUnsafeBytes { bytes throws(SystemCallError) in
                try Kernel.sendWithDescriptors(connection, bytes, descriptors: [])
            }
        }
        if listenerWatch == nil { watchListener() }
    }

    /// Reads one packet of connection `fd`: false when none was queued, or the connection
    /// closed (or failed) and is gone.
    func readOne(_ fd: Int32) -> Bool {
        var buffer = (UInt64(0), UInt64(0), UInt64(0)) // DescriptorPacket.size bytes, on the stack
        let packet: ReceivedPacket?
        do {
            packet = try withUnsafeMutableBytes(of: &buffer) { bytes throws(SystemCallError) in
                try Kernel.receiveWithDescriptors(fd, into: bytes)
            }
        } catch where error.errno == ECONNRESET {
            // The sender closed with the port's welcome unread: the kernel reports it once,
            // before the packets the sender queued, which are read next as after any close.
            return true
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
            guard !packet.descriptors.isEmpty, entries[token] == nil else {
                closeUnclaimed(packet.descriptors)
                return
            }
            guard connection.unclaimed + packet.descriptors.count <= maxUnclaimedPerConnection else {
                counters.overBound += packet.descriptors.count
                closeUnclaimed(packet.descriptors)
                if !connection.loggedOverBound {
                    connections[fd]?.loggedOverBound = true
                    RunLoopKitLog.port.warning("descriptors over a sender's bound closed unclaimed", metadata: [
                        "path": "\(path)", "pid": "\(connection.pid)", "bound": "\(maxUnclaimedPerConnection)",
                    ])
                }
                return
            }
            let now = Deadline.now()
            entries[token] = Entry(pid: connection.pid, connection: fd,
                                   descriptors: packet.descriptors.map(MessageDescriptor.init(adopting:)), readAt: now)
            connection.unclaimed += packet.descriptors.count
            connections[fd] = connection
            armTimer(before: now + unclaimedLifetime)
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

    func closeConnection(_ fd: Int32) {
        guard let connection = connections.removeValue(forKey: fd) else { return }
        close(fd, watchedBy: connection.hangUp)
        let now = Deadline.now()
        if rings.connectionClosed(fd, at: now) { armTimer(before: now + orphanGrace) }
        guard connection.unclaimed > 0 else { return }
        for (token, entry) in entries where entry.connection == fd && entry.orphanedAt == nil {
            entries[token]?.orphanedAt = now
        }
        armTimer(before: now + orphanGrace)
    }
}
