import RunLoopCore
import RunLoopSystem
import RunLoopWire

/// Large data components in shared memory (`docs/wire-format.md`, "Shared memory"): a
/// sending thread's ring per destination port, made once the port said it maps rings.
extension ThreadPortState {
    /// What became of a send in shared memory.
    enum SharedSend {
        /// The note was queued: the component is on its way.
        case sent
        /// The closure that fills the component failed: nothing was sent.
        case notFilled
        /// The ring could not take it (it broke): send it as plain frames; nothing was
        /// filled yet.
        case notShared
    }

    /// The ring a large component to `connection`'s port goes in, or nil for plain frames
    /// (`SharedRingState`'s transitions).
    func sharedRing(on connection: PortConnection) -> (SendingRing, DescriptorSender)? {
        switch connection.sharedRing {
        case .unavailable:
            return nil
        case .ready(let ring, let channel, _):
            if channel.isForkedCopy { // before every write: the mapping is the parent's too
                connection.sharedRing = .unavailable // the parent's ring: never written from here
                return nil
            }
            // At most every `portCheckInterval`: a system call, a tenth of a 64 KiB
            // component's time in the ring.
            let now = Deadline.now()
            guard now - ring.portCheckedAt >= SharedRingState.portCheckInterval else { return (ring, channel) }
            ring.portCheckedAt = now
            if channel.isClosedByPort { // the port's owner ended: a new one may map a new ring
                connection.sharedRing = .untried
                return nil
            }
            ring.pickUpDoorbell(from: channel, force: true)
            return (ring, channel)
        case .untried:
            guard let path = SharedRingState.sideChannelPath(of: connection.target),
                  let channel = try? DescriptorSender(path: path) else {
                connection.sharedRing = .unavailable
                return nil
            }
            connection.sharedRing = .awaitingWelcome(channel, since: .now())
            return nil
        case .awaitingWelcome(let channel, let since):
            guard channel.readWelcome() else {
                if !(Deadline.now() < since + SharedRingState.welcomeWait) || channel.isClosedByPort || channel.isForkedCopy {
                    connection.sharedRing = .unavailable
                }
                return nil
            }
            do {
                let ring = try SendingRing()
                connection.sharedRing = .ready(ring, channel: channel, announced: false)
                return (ring, channel)
            } catch {
                RunLoopKitLog.port.debug("no shared ring: large components go as plain frames",
                                         metadata: ["port": "\(connection.destination.address)", "error": "\(error)"])
                connection.sharedRing = .unavailable
                return nil
            }
        }
    }

    /// Sends `message` in the shared ring of `connection` if it is one data component the
    /// ring takes (`SharedRingLayout.gate` up to `largestComponent`) and the ring is there;
    /// false when it went nowhere (the caller sends it as plain frames). Not inlined: the
    /// common message only reads `PortConnection.mayShareMemory` before it.
    @inline(never)
    func sentShared(_ message: some OutgoingMessage, as kind: WireKind, correlationID: UInt64, on connection: PortConnection,
                    to destination: RemotePort, deadline: () -> Deadline) throws(PortError) -> Bool {
        let count = message.soleDataCount
        guard count >= SharedRingLayout.gate, count <= SharedRingLayout.largestComponent,
              let (ring, channel) = sharedRing(on: connection) else {
            if connection.followsRingComponent { try fenceQueuedNotes(on: connection, to: destination, deadline: deadline) }
            return false
        }
        let sent = try sendShared(id: message.soleDataID, byteCount: count, as: kind, correlationID: correlationID, in: ring,
                                  channel: channel, on: connection, to: destination, deadline: deadline) {
            message.copySoleData(into: $0)
            return true
        }
        if case .sent = sent { return true }
        return false
    }

    /// Sends a message of id `id` and one data component of `byteCount` bytes (at most a
    /// half of the ring) that `fill` writes in `ring`, as a note naming where they lie:
    /// waits for room until `deadline` (the port gives bytes back as its handlers finish
    /// with them), as a send waits for a full queue, checking that the port's owner lives;
    /// gives the ring to the port with its first note. The note goes as any message does
    /// (`send(_:as:correlationID:to:deadline:)`), so that ordering, high-water marks and
    /// errors are a plain message's.
    func sendShared(id: Int32, byteCount: Int, as kind: WireKind, correlationID: UInt64, in ring: SendingRing,
                    channel: DescriptorSender, on connection: PortConnection, to destination: RemotePort,
                    deadline: () -> Deadline, filling fill: (UnsafeMutableRawBufferPointer) -> Bool) throws(PortError) -> SharedSend {
        var waitUntil: Deadline?
        var waited = false
        var room = ring.room(for: byteCount)
        while case .full(let wakeAt) = room {
            let end = waitUntil ?? deadline()
            waitUntil = end
            let now = Deadline.now()
            guard now < end else {
                if waited { ring.doneWaiting() }
                throw PortError.loggedTimeout(.sendTimedOut(destination.address))
            }
            if !connection.namedOwnerLives() || channel.isClosedByPort {
                if waited { ring.doneWaiting() }
                connection.sharedRing = .untried
                close(connection)
                throw PortError.remoteInvalid(destination.address)
            }
            waited = true
            _ = ring.waitForRoom(wakeAt: wakeAt, before: min(end, now + ThreadPortState.livenessCheckInterval))
            room = ring.room(for: byteCount)
        }
        if waited { ring.doneWaiting() }
        guard case .free(let start, let bytes) = room else {
            RunLoopKitLog.port.warning("a shared ring's tail says what no port would: large components go as plain frames",
                                       metadata: ["port": "\(destination.address)"])
            connection.sharedRing = .unavailable
            return .notShared
        }
        guard fill(bytes) else { return .notFilled }
        guard case .ready(_, _, let announced) = connection.sharedRing else { return .notShared }
        if announced { ring.pickUpDoorbell(from: channel) } // the port sends it once it mapped the ring
        if announced, kind == .message, let after = ring.lastStart {
            // The one before it on this connection was in the ring too: queued, no ZeroMQ.
            if ring.enqueue(id: id, start: start, length: byteCount, after: after) {
                ring.commit(start: start, count: byteCount)
                ring.lastStart = start
                ring.queuedThrough = start
                connection.followsRingComponent = true
                return .sent
            }
        }
        if connection.followsRingComponent { try fenceQueuedNotes(on: connection, to: destination, deadline: deadline) }
        if !announced {
            do throws(DescriptorSendError) {
                _ = try channel.attach([ring.descriptor], as: ring.token, before: deadline())
            } catch {
                // The side channel failed under the send: this component goes as plain
                // frames, from where it was written, and so does every later one.
                connection.sharedRing = .unavailable
                try sendFromRing(OutgoingBytes(id: id, bytes: UnsafeRawBufferPointer(bytes)), as: kind,
                                 correlationID: correlationID, to: destination, deadline: deadline)
                return .sent
            }
        }
        do {
            try sendFromRing(SharedNoteMessage(id: id, note: SharedNote(token: ring.token, start: start, length: UInt64(byteCount))),
                             as: kind, correlationID: correlationID, to: destination, deadline: deadline)
        } catch {
            if !announced { channel.revoke(ring.token) } // announced again with the next note
            throw error
        }
        ring.commit(start: start, count: byteCount)
        ring.lastStart = start
        connection.followsRingComponent = true
        if !announced {
            ring.descriptorAnnounced()
            connection.sharedRing = .ready(ring, channel: channel, announced: true)
        }
        return .sent
    }

    /// Before a message over ZeroMQ on `connection`: if notes were queued in its ring since
    /// the last one, sends a **fence** first (a note of no bytes naming the last one
    /// queued), so that the port delivers them before what follows; and the next large
    /// component goes over ZeroMQ too (`SendingRing.lastStart`), so that the port delivers
    /// it after this message.
    func fenceQueuedNotes(on connection: PortConnection, to destination: RemotePort,
                          deadline: () -> Deadline) throws(PortError) {
        connection.followsRingComponent = false // the fence goes through here too
        guard case .ready(let ring, _, _) = connection.sharedRing else { return }
        ring.lastStart = nil
        guard let through = ring.queuedThrough else { return }
        ring.queuedThrough = nil
        do {
            try sendFromRing(SharedNoteMessage(id: 0, note: SharedNote(token: ring.token, start: through, length: 0)),
                             as: .message, correlationID: 0, to: destination, deadline: deadline)
        } catch {
            ring.queuedThrough = through
            connection.followsRingComponent = true
            throw error
        }
    }
}
