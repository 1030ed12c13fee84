import RunLoopCore

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

    func removePortEverywhere(_ port: LocalPort) {
        removeEverywhere(.port(port))
        disown(port)
    }
}
