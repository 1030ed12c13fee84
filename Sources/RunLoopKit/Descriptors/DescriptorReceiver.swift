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

    struct Entry {
        let pid: pid_t
        let connection: Int32
        let descriptors: [MessageDescriptor]
        /// When it was read: it waits for its message `unclaimedLifetime` from then.
        let readAt: Deadline
        /// When its connection closed (it waits for its message a grace period), or nil.
        var orphanedAt: Deadline?
    }

    struct Connection {
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
    package internal(set) var counters = Counters()

    // The connections and what they attached (DescriptorReceiver+Connections.swift).
    var connections: [Int32: Connection] = [:]
    var entries: [DescriptorToken: Entry] = [:]
    let uid = getuid()

    // The shared rings (SharedMemory/DescriptorReceiver+SharedRings.swift).
    /// The shared rings senders gave, mapped (`ring(_:from:)`), each unmapped `orphanGrace`
    /// after its connection closed.
    var rings = SharedRingTable()
    /// The mapped rings whose queue the port reads (given a doorbell), with their senders:
    /// what the port looks at before a receive and arms as it drains, without the table.
    var queues: [(ring: MappedRing, sender: MessageSenderBox)] = []
    /// Told when a sender may have queued a note (its doorbell rang, or it got one): the
    /// port looks at its queues (`nextQueuedNote()`) in its next pass.
    package var onQueuedNotes: (() -> Void)?
    /// The port's slot, whose flags say when to look at the queues.
    weak var slot: DescriptorReceiverSlot?

    // The upkeep in the loop's poll set (DescriptorReceiver+Housekeeping.swift).
    /// The loop whose poll set watches the listener, the hang-ups and the timer; nil until `watch(on:)`.
    weak var loop: ThreadRunLoop?
    var listenerWatch: LoopHousekeeping?
    /// The timerfd of the next deadline, made at its first arming, and its watch.
    var timer: Int32 = -1
    var timerWatch: LoopHousekeeping?
    /// When the timer fires, if armed (it may fire early: a sweep then arms it again).
    var timerArmedAt: Deadline?

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

    /// Takes `token`'s descriptors out of what waits, nil if none; with nothing left
    /// waiting, the timer is disarmed.
    func remove(_ token: DescriptorToken) -> [MessageDescriptor]? {
        guard let entry = entries.removeValue(forKey: token) else { return nil }
        if entry.orphanedAt == nil { connections[entry.connection]?.unclaimed -= entry.descriptors.count }
        if entries.isEmpty, !rings.hasOrphans, timerArmedAt != nil { disarmTimer() } // no timer while nothing waits
        return entry.descriptors
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

    private(set) var isInvalidated = false
}
