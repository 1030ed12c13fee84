/// Port-based input sources on the loop. Loop thread only.
extension ThreadRunLoop {
    /// Adds a port to `mode` (`addPort:forMode:`): its socket's descriptor joins the poll
    /// set, and its messages are delivered to its handler while the loop runs in the mode.
    /// A port can only be added to the loop of the thread that created it.
    public func add(_ port: LocalPort, to mode: LoopMode = .default) {
        precondition(port.ownerLoop === self, "a port can only be added to its own thread's run loop")
        guard port.isValid else { return }
        addItem(.port(port), binding: nil, to: mode)
    }

    public func remove(_ port: LocalPort, from mode: LoopMode = .default) {
        assertOwnerThread()
        removeItem(.port(port), from: mode)
    }

    public func contains(_ port: LocalPort, in mode: LoopMode = .default) -> Bool {
        assertOwnerThread()
        return items(of: mode)?.contains(.port(port)) ?? false
    }

    /// Pauses (or resumes) a port without taking it out of its modes: while paused its
    /// descriptor is out of the poll set and none of its messages is delivered (a message
    /// stream's back-pressure). Returns false if the port is in no mode of this loop.
    @discardableResult
    func setPaused(_ port: LocalPort, _ paused: Bool) -> Bool {
        assertOwnerThread()
        return ports.setPaused(port, paused, descriptors: &descriptors)
    }

    /// Whether the port is paused (see `setPaused(_:_:)`).
    func isPaused(_ port: LocalPort) -> Bool {
        assertOwnerThread()
        return ports.isPaused(port)
    }

    /// After a send on the socket of one of the loop's port sources (a requester's
    /// connection): libzmq's send may have taken the socket's pending commands, and with
    /// them the descriptor's signal that a reply arrived, so the socket is asked
    /// `ZMQ_EVENTS` and queued to be drained if a message waits.
    func sentOnPortSource(_ port: any PortSourceDriver) {
        assertOwnerThread()
        ports.queueIfMessageWaits(port)
    }

    func removePortEverywhere(_ port: LocalPort) {
        removeEverywhere(.port(port))
        ownedPorts[ObjectIdentifier(port)] = nil
    }

    /// Remembers a port created on this thread, so that teardown can close it.
    func adopt(_ port: LocalPort) {
        ownedPorts[ObjectIdentifier(port)] = WeakPort(port)
    }

    /// Closes the ports created on this thread that are still open (teardown).
    func closeOwnedPorts() {
        let ports = ownedPorts.values.compactMap(\.port)
        ownedPorts.removeAll()
        for port in ports { port.close() }
    }
}

struct WeakPort {
    weak var port: LocalPort?
    init(_ port: LocalPort) { self.port = port }
}
