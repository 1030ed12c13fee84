/// The port sources of one loop, by port, and the queue of those known to hold a message.
/// Loop thread only.
///
/// A port is registered in the poll set while it is in at least one mode and not paused,
/// through the loop's `DescriptorTable` like every other descriptor, and its registration
/// carries the port's `Entry` as its client (`DescriptorTable.Client.port`), as SwiftNIO's
/// `Registration` carries its channel: a report of the poll set hands the wait the entry
/// itself, and nothing here is looked up on a wake-up.
///
/// A port is queued as ready when it is added or resumed, when its descriptor fires
/// (see `PortBasedSource` for why a port of the running mode is not asked first), and
/// after each message it delivers; it leaves the queue when a receive finds it drained, or
/// when `hasPendingMessage()` does, asked after a send on its socket or after the one message of a
/// run that returns after a handled source.
/// A port queued for another mode stays there, without waking the loop again, until a run
/// in one of its modes drains it.
struct PortSourceTable {
    /// One port source of the loop, from its first mode until it leaves its last. Handed to
    /// the wait by the poll set's report, to the pass by `nextReady`, and back by
    /// `willDeliver`/`didDeliver`, so neither a wake-up nor a delivery looks anything up.
    ///
    /// Held by the table (`byPort`; the ready queue links it unretained), by its
    /// registration while that is in the descriptor table, and by a pass delivering its
    /// messages. It does not hold its registration, so that neither keeps the other alive
    /// once the port has left.
    final class Entry: IntrusiveQueueNode {
        let port: any PortBasedSource
        // Loop thread only, like the table; see architecture.md, exclusivity checks.
        @exclusivity(unchecked) var modeCount = 1
        /// Paused by a message stream's back-pressure: its descriptor wants nothing and none
        /// of its messages is delivered (see `setPaused`).
        @exclusivity(unchecked) var isPaused = false
        /// The entry's place in the ready queue (`ready`), and whether it has one.
        @exclusivity(unchecked) var queueLinks = IntrusiveQueueLinks<Entry>()
        /// False once the port has left the loop. Whoever still holds the entry then (a pass
        /// delivering its message, a report for its registration) must leave it alone: a port
        /// added again gets a new entry and a new registration.
        @exclusivity(unchecked) var isRegistered = true

        init(port: any PortBasedSource) {
            self.port = port
        }
    }

    /// A port's entry and its registration, by port, for adding, removing and pausing.
    private struct Member {
        let entry: Entry
        let registration: DescriptorTable.Registration
    }

    private var byPort: [ObjectIdentifier: Member] = [:]
    /// The ready queue: ready ports in the order they became ready, served round-robin,
    /// linked through their entries. The links are unretained: an entry is queued only
    /// while `byPort` holds it (`removed` and `removeAll` take it off first).
    /// (hot-path: unretained-links (docs/optimization-tips.md))
    private var ready = IntrusiveQueue<Entry>()
    /// The entry of the port the last send went through, while that port is in the loop:
    /// a requester sends every request on the same connection, and finding its entry
    /// again in `byPort` (hashing the port, probing the table) cost a fifth of what the
    /// send's `hasPendingMessage()` does. Cleared when its port leaves, so it keeps nothing alive.
    private var lastSentOn: Entry?

    var isEmpty: Bool { byPort.isEmpty }

    /// Counts one more mode for `port`, registering it the first time (it joins the poll
    /// set before the loop's next sleep).
    mutating func added(_ port: any PortBasedSource, descriptors: inout DescriptorTable) {
        let id = ObjectIdentifier(port)
        if let member = byPort[id] {
            member.entry.modeCount += 1
            return
        }
        let entry = Entry(port: port)
        byPort[id] = Member(entry: entry, registration: descriptors.registerPort(port.pollDescriptor, entry))
        // A burst may have arrived before the port was added, with no signal left on its
        // descriptor: it is queued, and the pass's receive finds out. Not `hasPendingMessage()`:
        // processing the socket's commands first could process a peer's disconnect before
        // the reply it sent just before, and a connecting socket drops what its
        // closed connection still held.
        ready.append(entry)
    }

    /// Counts one mode less for `port`, leaving the poll set when it is in none.
    mutating func removed(_ port: any PortBasedSource, descriptors: inout DescriptorTable, poller: Poller) {
        guard let member = byPort[ObjectIdentifier(port)] else { return }
        let entry = member.entry
        entry.modeCount -= 1
        guard entry.modeCount == 0 else { return }
        // At once: the port may close its socket next. The registration leaves the descriptor
        // table with it, so no later report can carry this entry.
        descriptors.unregister(member.registration, poller: poller)
        byPort[ObjectIdentifier(port)] = nil
        entry.isRegistered = false
        if lastSentOn === entry { lastSentOn = nil }
        ready.remove(entry)
        port.detachedFromLoop()
    }

    /// The poll set reported the port's descriptor. A port of the running mode is queued
    /// to be drained now (its receives confirm that it is drained); any other port is asked
    /// `hasPendingMessage()` at once, which consumes the descriptor's signal so that a port held for
    /// another mode never keeps waking the loop. A port that has left the loop or is paused
    /// is left alone.
    mutating func descriptorReady(_ entry: Entry, runningMode items: ModeItems) {
        guard entry.isRegistered, !entry.isPaused else { return }
        if items.contains(port: entry.port) || entry.port.hasPendingMessage() {
            ready.append(entry)
        } else {
            ready.remove(entry)
        }
    }

    /// The first ready port that is in `items`' mode and not paused. (`mutating`, though
    /// it changes nothing: hot-path: mutating-in-place (docs/optimization-tips.md).)
    mutating func nextReady(in items: ModeItems) -> Entry? {
        ready.first { !$0.isPaused && items.contains(port: $0.port) }
    }

    /// Takes `entry` off the ready queue before one of its messages is delivered.
    /// (Delivery runs user code, which may add or remove ports, so it happens outside
    /// any mutation of the table: see `ThreadRunLoop.deliverMessages(from:in:_:)`.)
    mutating func willDeliver(from entry: Entry) {
        ready.remove(entry)
    }

    /// Requeues `entry` at the back unless the receive found it drained (or it was removed
    /// meanwhile): a port is drained until a receive comes back empty. With `askingFirst`
    /// (the one message of a run that returns after a handled source), a port that can be
    /// asked (`canAskInsteadOfDraining`) is requeued only if `hasPendingMessage()` says another
    /// message waits, so that the next run sleeps at once rather than make a pass whose
    /// receive only finds it empty.
    mutating func didDeliver(from entry: Entry, _ outcome: PortDelivery, askingFirst: Bool = false) {
        guard outcome != .empty, entry.isRegistered else { return }
        if askingFirst && entry.port.canAskInsteadOfDraining && !entry.port.hasPendingMessage() { return }
        ready.append(entry)
    }

    /// After a send on `port`'s socket, which may have taken the socket's pending commands
    /// and with them the descriptor's signal: asks `hasPendingMessage()` and queues the port as
    /// ready if a message waits, or takes it off the queue if none does. The answer is as
    /// good as an empty receive's (the descriptor is re-armed by both, and the
    /// descriptor signals the next message): a requester's connection, queued after the
    /// reply it delivered, then sleeps for the next reply without a pass that only finds it
    /// empty.
    mutating func updateReadinessAfterSend(on port: any PortBasedSource) {
        let entry: Entry
        if let last = lastSentOn, last.port === port {
            entry = last
        } else {
            guard let found = byPort[ObjectIdentifier(port)]?.entry else { return }
            entry = found
            lastSentOn = found
        }
        if port.hasPendingMessage() {
            ready.append(entry)
        } else {
            ready.remove(entry)
        }
    }

    /// Whether `port` is queued as ready (its next pass in one of its modes will try to
    /// receive from it), as the table knows it: a question to the table only, never to
    /// the socket, so that a snapshot changes nothing.
    func isQueuedAsReady(_ port: any PortBasedSource) -> Bool {
        byPort[ObjectIdentifier(port)]?.entry.queueLinks.isQueued ?? false
    }

    /// Pauses a port without taking it out of its modes (a message stream's back-pressure):
    /// its descriptor leaves the poll set before the next sleep and no message of it is
    /// delivered; resumed, it comes back and is queued if a message waits. Returns false if
    /// the port is in no mode.
    mutating func setPaused(_ port: any PortBasedSource, _ paused: Bool, descriptors: inout DescriptorTable) -> Bool {
        guard let member = byPort[ObjectIdentifier(port)] else { return false }
        guard member.entry.isPaused != paused else { return true }
        member.entry.isPaused = paused
        descriptors.markChanged(member.registration)
        if !paused { ready.append(member.entry) } // signals that came while it was out of the poll set: the receive finds out
        return true
    }

    func isPaused(_ port: any PortBasedSource) -> Bool {
        byPort[ObjectIdentifier(port)]?.entry.isPaused ?? false
    }

    /// The registration of `port`'s descriptor, while the port is in a mode.
    func registration(of port: any PortBasedSource) -> DescriptorTable.Registration? {
        byPort[ObjectIdentifier(port)]?.registration
    }

    /// Takes every port out of the loop, whatever its modes (teardown, after every mode's
    /// items were removed: normally none is left).
    mutating func removeAll(descriptors: inout DescriptorTable, poller: Poller) {
        let members = byPort.values
        byPort.removeAll()
        ready.removeAll()
        lastSentOn = nil
        for member in members {
            descriptors.unregister(member.registration, poller: poller)
            member.entry.isRegistered = false
            member.entry.port.detachedFromLoop()
        }
    }
}
