/// The port sources of one loop: their poll-set registrations and the queue of ports
/// known to hold a message. Loop thread only.
///
/// A port is registered in the poll set while it is in at least one mode. It is queued as
/// ready when it is added with a message waiting (`ZMQ_EVENTS`), when its descriptor fires
/// (see `PortSourceDriver` for why a port of the running mode is not asked first), and
/// after each message it delivers; it leaves the queue when a receive finds it drained.
/// A port queued for another mode stays there, without waking the loop again, until a run
/// in one of its modes drains it.
struct PortSourceTable {
    private struct Entry {
        let port: any PortSourceDriver
        var modeCount: Int
    }

    private var entries: [UInt64: Entry] = [:]
    private var tokens: [ObjectIdentifier: UInt64] = [:]
    private var nextToken: UInt64 = Poller.wakeToken + 1
    /// Ready ports in the order they became ready, served round-robin.
    private var ready: [UInt64] = []

    var isEmpty: Bool { entries.isEmpty }

    /// Counts one more mode for `port`, registering it in the poll set the first time.
    mutating func added(_ port: any PortSourceDriver, poller: Poller) throws(SystemCallError) {
        let id = ObjectIdentifier(port)
        if let token = tokens[id] {
            entries[token]!.modeCount += 1
            return
        }
        let token = nextToken
        nextToken += 1
        try poller.register(port.pollDescriptor, token: token)
        tokens[id] = token
        entries[token] = Entry(port: port, modeCount: 1)
        markIfPending(token) // a burst may have arrived before the port was added
    }

    /// Counts one mode less for `port`, leaving the poll set when it is in none.
    mutating func removed(_ port: any PortSourceDriver, poller: Poller) {
        guard let token = tokens[ObjectIdentifier(port)], var entry = entries[token] else { return }
        entry.modeCount -= 1
        guard entry.modeCount == 0 else {
            entries[token] = entry
            return
        }
        try? poller.deregister(port.pollDescriptor) // the port may already have closed its socket
        entries[token] = nil
        tokens[ObjectIdentifier(port)] = nil
        ready.removeAll { $0 == token }
        port.detachedFromLoop()
    }

    /// The poll set reported the port's descriptor. A port of the running mode is queued
    /// to be drained now (its receives confirm with `ZMQ_EVENTS`); any other port is asked
    /// `ZMQ_EVENTS` at once, which consumes the descriptor's signal so that a port held for
    /// another mode never keeps waking the loop.
    mutating func descriptorReady(_ token: UInt64, runningMode items: ModeItems) {
        guard let port = entries[token]?.port else { return }
        if items.contains(.port(port)) {
            if !ready.contains(token) { ready.append(token) }
        } else if port.hasPendingMessage() {
            if !ready.contains(token) { ready.append(token) }
        } else {
            ready.removeAll { $0 == token }
        }
    }

    /// The first ready port that is in `items`' mode.
    func nextReady(in items: ModeItems) -> (any PortSourceDriver)? {
        guard !ready.isEmpty else { return nil }
        for token in ready {
            guard let port = entries[token]?.port else { continue }
            if items.contains(.port(port)) { return port }
        }
        return nil
    }

    /// Takes `port` off the ready queue before one of its messages is delivered.
    /// (Delivery runs user code, which may add or remove ports, so it happens outside
    /// any mutation of the table: see `ThreadRunLoop.deliverOneMessage(from:)`.)
    mutating func willDeliver(from port: any PortSourceDriver) {
        guard let token = tokens[ObjectIdentifier(port)] else { return }
        ready.removeAll { $0 == token }
    }

    /// Requeues `port` at the back unless the receive found it drained (or it was removed
    /// meanwhile): a port is drained until a receive comes back empty.
    mutating func didDeliver(from port: any PortSourceDriver, _ outcome: PortDelivery) {
        guard outcome != .empty, let token = tokens[ObjectIdentifier(port)], !ready.contains(token) else { return }
        ready.append(token)
    }

    /// Whether `port` holds a message, for a snapshot. Asking `ZMQ_EVENTS` may consume the
    /// descriptor's wake-up, so a port found holding one is queued as ready.
    mutating func checkPending(_ port: any PortSourceDriver) -> Bool {
        guard let token = tokens[ObjectIdentifier(port)] else { return false }
        markIfPending(token)
        return ready.contains(token)
    }

    /// Every registered port, for teardown.
    var allPorts: [any PortSourceDriver] { entries.values.map(\.port) }

    private mutating func markIfPending(_ token: UInt64) {
        guard let port = entries[token]?.port, !ready.contains(token), port.hasPendingMessage() else { return }
        ready.append(token)
    }
}
