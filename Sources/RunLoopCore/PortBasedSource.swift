/// What the run loop needs of a port-based input source (the guide's term): a descriptor
/// for the poll set, a question — does a message wait? — and a way to take one.
///
/// The descriptor is **edge-triggered**: it says the source's state *may* have changed,
/// not that a message waits, and it may stay quiet while messages are queued (a ZeroMQ
/// socket's, RunLoopKit's ports, is such a descriptor). So the loop never trusts it alone.
/// A port of the running mode whose descriptor fires is queued and drained: it stays
/// queued after every message and leaves the queue only when a receive finds nothing (or
/// `hasPendingMessage()`, asked after a send on the port or after the one message of a run
/// that returns after a handled source, says nothing waits). Either answer re-arms the
/// descriptor, so nothing is stranded. A port of another mode is asked
/// `hasPendingMessage()` at once, which also consumes the descriptor's signal, and stays
/// queued, silent, until its mode runs.
///
/// All calls are made on the loop's thread.
package protocol PortBasedSource: AnyObject {
    /// The descriptor to watch for readability; never read or closed by the loop.
    var pollDescriptor: Int32 { get }
    /// Whether a message can be taken now without blocking; re-arms the descriptor.
    func hasPendingMessage() -> Bool
    /// Whether `hasPendingMessage()` may stand in for the receive that would find the port
    /// drained, after the one message of a run that returns after a handled source. True
    /// for a source that keeps what a peer sent before hanging up until it is read (a
    /// port); false for one that may drop it when it learns of the hang-up before reading
    /// (a requester's connection), whose next step, a send, asks anyway.
    var canAskInsteadOfDraining: Bool { get }
    /// Takes one message without blocking and delivers it. `.empty` only once nothing
    /// waits (and the descriptor is re-armed).
    func handleOneMessage() -> PortDelivery
    /// The source was removed from the loop's last mode or the loop was torn down.
    func detachedFromLoop()
}

/// What one attempt to take a port's message found.
package enum PortDelivery {
    /// A message was delivered to the port's handler.
    case delivered
    /// A message was taken but dropped (malformed, or the receive failed); more may wait.
    case dropped
    /// Nothing waited (and the descriptor is re-armed): the port is drained.
    case empty
}

/// Pausing a port source and telling the loop of a send on one. Loop thread only.
extension ThreadRunLoop {
    /// Pauses (or resumes) a port without taking it out of its modes: while paused its
    /// descriptor is out of the poll set and none of its messages is delivered (a message
    /// stream's back-pressure). Returns false if the port is in no mode of this loop.
    @discardableResult
    package func setPaused(_ port: any PortBasedSource, _ paused: Bool) -> Bool {
        assertOwnerThread()
        return ports.setPaused(port, paused, descriptors: &descriptors)
    }

    /// Whether the port is paused (see `setPaused(_:_:)`).
    func isPaused(_ port: any PortBasedSource) -> Bool {
        assertOwnerThread()
        return ports.isPaused(port)
    }

    /// After a send on one of the loop's port sources: the send may have consumed the
    /// descriptor's signal that a message arrived, so the source is asked
    /// `hasPendingMessage()`: queued to be drained if a message waits, else off the ready queue.
    package func sentOnPortSource(_ port: any PortBasedSource) {
        assertOwnerThread()
        ports.updateReadinessAfterSend(on: port)
    }

    /// `sentOnPortSource(_:)` for a source that is on its loop's thread by construction (a
    /// requester's connection joins only its own thread's loop, and is used only there):
    /// the same, without asking the thread-local key again at every request.
    package func sentOnOwnThreadsPortSource(_ port: any PortBasedSource) {
        ports.updateReadinessAfterSend(on: port)
    }
}
