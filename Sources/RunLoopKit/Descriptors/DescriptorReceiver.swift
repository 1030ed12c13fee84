import Glibc
import RunLoopCore
import RunLoopSystem

/// The receiving end of a port's descriptor side channel: a unix `SOCK_SEQPACKET` listener
/// beside the port's ipc socket. It accepts connections of this user only (`SO_PEERCRED`),
/// reads packets without waiting, a connection's no further than its messages need
/// (`take(_:from:)`), and keeps each `attach` packet's descriptors under its token and the
/// sending process, until the ZeroMQ message that names them takes them. What no message
/// takes is closed, bounded by what is alive:
///
/// - **A sender that is gone.** Once watched by its port's loop (`watch(on:)`), the
///   listener and each connection's hang-up are in the loop's poll set (`LoopHousekeeping`,
///   every mode, no source): a connection whose sender closed it (the sending thread ended,
///   the process exited or was killed) is read to its end and closed at once, and what it
///   attached becomes orphans, closed `orphanGrace` after the hang-up, by a timer (a
///   timerfd in the same poll set, armed only while descriptors wait; an idle port has no
///   timer). Why a grace, not a proof: the hang-up only says the sender can send no more.
///   Its message may be ahead of the hang-up and not yet in the port's queue: a killed
///   process's message that reached its ipc connection is still to be read by the port's
///   ZeroMQ I/O thread (which reads a dead connection to its end before it drops it), and
///   a thread's last inproc message sits in the port's queue until the port reads it. A
///   message not written out before the process died is lost with it and will never come.
///   Proving that nothing of that process can still come would take the port's ZeroMQ
///   connection from the same pid seen gone (a socket monitor on every named port, whose
///   events carry no pid) and then the port's queue read to its end; the grace bounds it
///   instead, at the cost that a dead sender's message queued behind more than
///   `orphanGrace` of the port's backlog loses its descriptors (dropped, counted
///   `unknownDescriptors`), as before.
/// - **A live sender whose messages do not come** (a hostile one, or one that never sends
///   them): its descriptors are bounded per connection (`maxUnclaimedPerConnection`; the
///   excess closes at once) and in time (`unclaimedLifetime` after they were read, by the
///   same timer). Both drops are counted (`overBound`, `expired`) and logged, at most once
///   per connection and per sweep. Packets not read yet stay in the kernel's queue of the
///   connection, bounded by its send buffer (the sender waits, `wouldBlock`).
///
/// Without `watch(on:)` (a receiver of its own, in a test), orphans and expired
/// descriptors are closed at the next `drain()` or `take(_:from:)`.
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
        /// Descriptors closed over a connection's bound (also in `closedUnclaimed`).
        package var overBound = 0
        /// Descriptors of a live connection closed after `unclaimedLifetime` without their
        /// message (also in `closedUnclaimed`).
        package var expired = 0
        /// Shared rings mapped (`ring(_:from:)`).
        package var ringsMapped = 0
        /// Shared data components found in a mapped ring (each note a message named), by a
        /// note over ZeroMQ or a queued one.
        package var sharedComponents = 0
        /// Shared rings refused: not sealed, not a ring's layout, a second one from one
        /// connection, or over `maxRings`.
        package var ringsRefused = 0
        /// Of `sharedComponents`, those whose note was queued in the ring rather than sent
        /// over ZeroMQ (`QueuedNote`).
        package var queuedNotes = 0
        /// Fences read: notes of no bytes a sender sent over ZeroMQ after queued notes.
        package var fences = 0
    }

    private struct Entry {
        let pid: pid_t
        let connection: Int32
        let descriptors: [MessageDescriptor]
        /// When it was read: it waits for its message `unclaimedLifetime` from then.
        let readAt: Deadline
        /// When its connection closed (it waits for its message a grace period), or nil.
        var orphanedAt: Deadline?
    }

    private struct Connection {
        let pid: pid_t
        /// Who connected, as the kernel says (`SO_PEERCRED`).
        let sender: MessageSenderBox
        var unclaimed = 0
        /// Its hang-up in the loop's poll set, once watched (`watch(on:)`).
        var hangUp: LoopHousekeeping?
        /// Whether a drop over its bound was logged (once per connection).
        var loggedOverBound = false
    }

    /// The listener, readable when a connection is pending; connections are read at each `drain()`.
    package let descriptor: Int32
    package let path: String
    /// The most descriptors one connection may have waiting for their messages.
    package let maxUnclaimedPerConnection: Int
    package private(set) var counters = Counters()
    private var connections: [Int32: Connection] = [:]
    private var entries: [DescriptorToken: Entry] = [:]
    /// The shared rings senders gave, mapped (`ring(_:from:)`), each unmapped `orphanGrace`
    /// after its connection closed.
    private var rings = SharedRingTable()
    /// The mapped rings whose queue the port reads (given a doorbell), with their senders:
    /// what the port looks at before a receive and arms as it drains, without the table.
    private var queues: [(ring: MappedRing, sender: MessageSenderBox)] = []
    private let uid = getuid()
    /// The loop whose poll set watches the listener, the hang-ups and the timer; nil until `watch(on:)`.
    private weak var loop: ThreadRunLoop?
    private var listenerWatch: LoopHousekeeping?
    /// The timerfd of the next deadline, made at its first arming, and its watch.
    private var timer: Int32 = -1
    private var timerWatch: LoopHousekeeping?
    /// When the timer fires, if armed (it may fire early: a sweep then arms it again).
    private var timerArmedAt: Deadline?

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
    /// wait for their message, from the hang-up: it may still be on its way to the port's
    /// ZeroMQ queue, or in it (see the type's comment). Past it, the timer closes them.
    /// A change applies to what waits already.
    package var orphanGrace = Duration.seconds(10) { didSet { armTimer() } }

    /// How long descriptors of a live connection wait for their message once read: a
    /// legitimate sender's message follows its packet at once, and is read no later than
    /// the port's backlog allows; past it, they are closed (`expired`), and the message,
    /// if it comes, is dropped (`unknownDescriptors`). A change applies to what waits already.
    package var unclaimedLifetime = Duration.seconds(60) { didSet { armTimer() } }

    /// Watches the listener, the connections' hang-ups and the timer in `loop`'s poll set,
    /// for the loop's whole life (`LoopHousekeeping`), so that what a gone sender left is
    /// closed without another message. Loop thread only; once.
    package func watch(on loop: ThreadRunLoop) {
        guard !isInvalidated, self.loop == nil else { return }
        self.loop = loop
        watchListener()
        for (fd, connection) in connections where connection.hangUp == nil { watchHangUp(of: fd) }
        armTimer()
    }

    private func watchListener() {
        guard let loop, listenerWatch == nil else { return }
        let watch = LoopHousekeeping(descriptor: descriptor, watching: .readable) { [weak self] in
            self?.connectionsPending()
        }
        listenerWatch = watch
        loop.addHousekeeping(watch)
    }

    private func watchHangUp(of fd: Int32) {
        guard let loop else { return }
        let watch = LoopHousekeeping(descriptor: fd, watching: .hangUp) { [weak self] in self?.hungUp(fd) }
        connections[fd]?.hangUp = watch
        loop.addHousekeeping(watch)
    }

    /// Removes `watch` from the loop's poll set, before its descriptor closes (the caller's
    /// next step, on the loop's thread); nothing once the loop is gone.
    private func unwatch(_ watch: LoopHousekeeping?) {
        guard let watch, let loop, loop.isOwnerThread else { return }
        loop.removeHousekeeping(watch)
    }

    /// Closes `fd`, out of the loop's poll set first (`watch`). Off the loop's thread (a port
    /// released elsewhere), both wait for that thread, as a descriptor source's close does:
    /// closed first, its number could be another registration's by the time the loop took
    /// it out, and the removal would take that one out instead. At once if the loop is gone.
    private func close(_ fd: Int32, watchedBy watch: LoopHousekeeping?) {
        if let watch, let loop, !loop.isOwnerThread,
           loop.runOnOwnerThread({ $0.removeHousekeeping(watch); Kernel.close(fd) }) {
            return
        }
        unwatch(watch)
        Kernel.close(fd)
    }

    /// The listener is readable: accepts what is pending.
    private func connectionsPending() {
        guard !isInvalidated else { return }
        acceptPending()
    }

    /// Connection `fd`'s sender hung up: its packets are read to the end, it closes, and
    /// what it attached becomes orphans (`closeConnection`).
    private func hungUp(_ fd: Int32) {
        guard !isInvalidated, connections[fd] != nil else { return }
        while readOne(fd) {}
        closeConnection(fd) // read to its end, it closed; if not, the hang-up would be reported again at once
    }

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
    private func read(until token: DescriptorToken) {
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
    private func acceptPending() {
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
    private func readOne(_ fd: Int32) -> Bool {
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

    private func remove(_ token: DescriptorToken) -> [MessageDescriptor]? {
        guard let entry = entries.removeValue(forKey: token) else { return nil }
        if entry.orphanedAt == nil { connections[entry.connection]?.unclaimed -= entry.descriptors.count }
        if entries.isEmpty, !rings.hasOrphans, timerArmedAt != nil { disarmTimer() } // no timer while nothing waits
        return entry.descriptors
    }

    private func closeConnection(_ fd: Int32) {
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

    /// The shared ring process `pid` gave under `token` (its descriptor attached under it,
    /// named by the first note that uses it), mapped at that first note; nil (counted) for
    /// a token that names no ring from that process, or a ring refused (`MappedRing`'s
    /// checks, `SharedRingTable`'s bounds).
    func ring(_ token: DescriptorToken, from pid: pid_t) -> MappedRing? {
        switch rings.lookup(token, from: pid) {
        case .ring(let ring):
            // A note or a fence: queued notes after it, or before the message after it, are next.
            slot?.queuedNotesMayWait = true
            return ring
        case .anotherProcess:
            counters.unknownTokens += 1
            return nil
        case .unknown:
            break
        }
        if entries[token] == nil { read(until: token) }
        guard let entry = entries[token], entry.pid == pid, let descriptors = remove(token) else {
            counters.unknownTokens += 1
            return nil
        }
        defer { descriptors.forEach { $0.close() } } // a mapping outlives its descriptor
        guard descriptors.count == 1, let fd = descriptors[0].descriptor,
              rings.admits(from: entry.connection, orphaned: entry.orphanedAt != nil) else {
            counters.ringsRefused += 1
            return nil
        }
        let ring: MappedRing
        do {
            ring = try MappedRing(checking: fd)
        } catch {
            counters.ringsRefused += 1
            RunLoopKitLog.port.warning("a sender's shared ring refused", metadata: [
                "path": "\(path)", "pid": "\(pid)", "reason": "\(error)",
            ])
            return nil
        }
        counters.ringsMapped += 1
        rings.add(ring, token: token, pid: pid, connection: entry.connection, orphanedAt: entry.orphanedAt)
        if let orphanedAt = entry.orphanedAt {
            armTimer(before: orphanedAt + orphanGrace)
        } else {
            giveDoorbell(for: ring, token: token, on: entry.connection)
        }
        return ring
    }

    /// Gives the sender of `ring` a doorbell (`DescriptorPacket.doorbell`) on its live
    /// connection, if the receiver is watched: one end of a unix socket pair, whose other
    /// end joins the loop's poll set. From then on the sender may queue notes in the ring
    /// (`QueuedNote`), and rings when the port armed the ring (`MappedRing.arm()`). Best
    /// effort: without one, every note comes over ZeroMQ.
    private func giveDoorbell(for ring: MappedRing, token: DescriptorToken, on connection: Int32) {
        guard let loop, loop.isOwnerThread, let sender = connections[connection]?.sender,
              let (own, given) = try? Kernel.unixPacketPair() else { return }
        defer { Kernel.close(given) } // the sender has its own once sent
        let sent = (try? DescriptorPacket.doorbell(token).withUnsafeBytes { bytes throws(SystemCallError) in
            try Kernel.sendWithDescriptors(connection, bytes, descriptors: [given])
        }) ?? false
        guard sent else { return Kernel.close(own) }
        let watch = LoopHousekeeping(descriptor: own, watching: .readable) { [weak self, weak ring] in
            if let ring { self?.doorbellRang(ring) }
        }
        loop.addHousekeeping(watch)
        ring.queueOpen = true
        queues.append((ring, sender))
        ring.doorbell = own
        ring.doorbellWatch = watch
        _ = ring.arm()
        onQueuedNotes?()
    }

    /// A sender rang its doorbell: what it sent is read (it only wakes), and the port is
    /// told (`onQueuedNotes`), which delivers the queued notes in one of its modes.
    /// Once the sender closed its end (it ended), the doorbell closes; what it queued is
    /// still delivered, until the ring is unmapped.
    private func doorbellRang(_ ring: MappedRing) {
        let fd = ring.doorbell
        guard fd >= 0 else { return }
        var bytes = (UInt64(0), UInt64(0))
        while true {
            let read: Int
            do {
                read = try withUnsafeMutableBytes(of: &bytes) { buffer throws(SystemCallError) in try Kernel.read(fd, into: buffer) }
            } catch where error.code == .interrupted {
                continue
            } catch where error.code == .again {
                break
            } catch {
                read = 0
            }
            if read == 0 { // the sender's end closed (or failed): no more rings
                closeDoorbells(of: [ring])
                break
            }
        }
        onQueuedNotes?()
    }

    /// Told when a sender may have queued a note (its doorbell rang, or it got one): the
    /// port looks at its queues (`nextQueuedNote()`) in its next pass.
    package var onQueuedNotes: (() -> Void)?

    /// The port's slot, whose flags say when to look at the queues.
    weak var slot: DescriptorReceiverSlot?

    /// A queued note that may be delivered now, its ring and who sent it (counted
    /// `queuedNotes`; `MappedRing.take(_:)` it as it is delivered).
    func nextQueuedNote() -> (MappedRing, QueuedNote, MessageSenderBox)? {
        for (ring, sender) in queues {
            if let note = ring.nextQueued() { return (ring, note, sender) }
        }
        return nil
    }

    /// Asks every sender with a doorbell to ring it at its next queued note: true if a
    /// note may be delivered now.
    func armQueues() -> Bool {
        var ready = false
        for (ring, _) in queues where ring.arm() { ready = true }
        return ready
    }

    /// Counts a shared data component found in its ring, by a note over ZeroMQ or `queued`.
    func countFence() { counters.fences += 1 }

    func countSharedComponent(queued: Bool) {
        counters.sharedComponents += 1
        if queued { counters.queuedNotes += 1 }
    }

    /// Rings no longer mapped: their queues are not read again, their doorbells close.
    private func forget(_ unmapped: [MappedRing]) {
        guard !unmapped.isEmpty else { return }
        queues.removeAll { entry in unmapped.contains { $0 === entry.ring } }
        closeDoorbells(of: unmapped)
    }

    /// Closes the doorbells of `rings`.
    private func closeDoorbells(of rings: [MappedRing]) {
        for ring in rings where ring.doorbell >= 0 {
            close(ring.doorbell, watchedBy: ring.doorbellWatch)
            ring.doorbell = -1
            ring.doorbellWatch = nil
        }
    }

    /// Shared rings mapped now.
    package var mappedRingCount: Int { rings.count }

    /// When `entry`'s descriptors are closed if no message took them.
    private func deadline(of entry: Entry) -> Deadline {
        entry.orphanedAt.map { $0 + orphanGrace } ?? entry.readAt + unclaimedLifetime
    }

    /// Closes the orphans whose grace is over and the live connections' descriptors past
    /// their lifetime (counted `expired`, logged once per sending process), then arms the
    /// timer for the next deadline, or disarms it.
    private func closeDue() {
        let now = Deadline.now()
        if rings.hasOrphans { forget(rings.unmapOrphans(at: now, grace: orphanGrace)) }
        guard !entries.isEmpty else { return armTimer() }
        var expired: [pid_t: Int] = [:]
        for (token, entry) in entries where !(now < deadline(of: entry)) {
            guard let descriptors = remove(token) else { continue }
            counters.closedUnclaimed += descriptors.count
            if entry.orphanedAt == nil {
                counters.expired += descriptors.count
                expired[entry.pid, default: 0] += descriptors.count
            }
            descriptors.forEach { $0.close() }
        }
        for (pid, count) in expired {
            RunLoopKitLog.port.warning("descriptors whose message did not come closed unclaimed", metadata: [
                "path": "\(path)", "pid": "\(pid)", "count": "\(count)", "after": "\(unclaimedLifetime)",
            ])
        }
        armTimer()
    }

    private func disarmTimer() {
        timerArmedAt = nil
        try? Kernel.setTimer(timer, at: nil)
    }

    /// The timer fired (or fires early, armed for a deadline since taken): closes what is due.
    private func timerFired() {
        guard !isInvalidated else { return }
        disarmTimer() // no longer readable
        if listenerWatch == nil { acceptPending() } // an accept failed: tried again
        closeDue()
    }

    /// Arms the timer for `deadline` if it is sooner than its arming; with none, for the
    /// earliest deadline of what waits, or disarms it when nothing does. Only on a watched
    /// receiver; the timerfd is made at the first arming (if it cannot be, what is due
    /// closes at the next `take` or `drain()`).
    private func armTimer(before deadline: Deadline? = nil) {
        guard let loop, loop.isOwnerThread, !isInvalidated else { return }
        let next: Deadline?
        if let deadline {
            guard timerArmedAt.map({ deadline < $0 }) ?? true else { return }
            next = deadline
        } else {
            next = [entries.values.lazy.map(deadline(of:)).min(), rings.nextUnmap(grace: orphanGrace)].compactMap { $0 }.min()
        }
        guard next != timerArmedAt else { return }
        if timer < 0 {
            guard next != nil else { return }
            do {
                timer = try Kernel.timerDescriptor()
            } catch {
                RunLoopKitLog.port.debug("descriptor side channel: no timer", metadata: ["path": "\(path)", "error": "\(error)"])
                return
            }
            let watch = LoopHousekeeping(descriptor: timer, watching: .readable) { [weak self] in self?.timerFired() }
            timerWatch = watch
            loop.addHousekeeping(watch)
        }
        do {
            try Kernel.setTimer(timer, at: next)
            timerArmedAt = next
        } catch {
            timerArmedAt = nil
        }
    }

    /// Closes the descriptors whose connection closed before `cutoff` and that no message
    /// took: a sender killed between its `attach` and its message, or whose message was lost.
    package func closeOrphans(before cutoff: Deadline) {
        for (token, entry) in entries {
            if let orphaned = entry.orphanedAt, orphaned < cutoff, let descriptors = remove(token) {
                counters.closedUnclaimed += descriptors.count
                descriptors.forEach { $0.close() }
            }
        }
        armTimer()
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
        for (fd, connection) in connections { close(fd, watchedBy: connection.hangUp) }
        connections = [:]
        forget(rings.removeAll())
        if timer >= 0 { close(timer, watchedBy: timerWatch) }
        timer = -1
        timerWatch = nil
        close(descriptor, watchedBy: listenerWatch)
        listenerWatch = nil
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
    var receiver: DescriptorReceiver? { didSet { receiver?.slot = self } }
    /// Whether a sender may queue notes in a ring the port mapped (`QueuedNote`): set once
    /// the port gave a doorbell; then the port arms the rings whenever it is drained.
    var queuesOpen = false
    /// Whether a queued note may be deliverable now: a doorbell rang, a note or a fence
    /// came over ZeroMQ, or a queued note was delivered. The port then looks at the queues
    /// before its next receive, and clears it when it found none.
    var queuedNotesMayWait = false
}
