/// What the run loop needs of a port-based input source: a descriptor for the poll set
/// and a way to confirm and take one message.
///
/// ZeroMQ's `ZMQ_FD` is edge-triggered: it tells that the socket's state *may* have
/// changed, not that a message waits, and it may stay quiet while messages are queued.
/// So the loop never trusts the descriptor alone. A port of the running mode whose
/// descriptor fires is queued and drained: it stays queued after every message and
/// leaves the queue only when a non-blocking receive finds nothing (or `ZMQ_EVENTS`,
/// asked after a send on its socket or after the one message of a run that returns after
/// a handled source, says nothing waits). libzmq answers either only
/// after processing the socket's command mailbox (see
/// `ZMQSocket.receive(dontWait:maxFrames:_:)`), so the descriptor is re-armed and nothing
/// is stranded.
/// A port of another mode is asked `hasPendingMessage()` (`ZMQ_EVENTS`) at once, which
/// also consumes the descriptor's signal, and stays queued, silent, until its mode runs.
///
/// All calls are made on the loop's thread.
package protocol PortSourceDriver: AnyObject {
    /// The descriptor to watch for readability (`ZMQ_FD`); never read or closed by the loop.
    var pollDescriptor: Int32 { get }
    /// Whether a message can be received now without blocking (`ZMQ_EVENTS & ZMQ_POLLIN`).
    func hasPendingMessage() -> Bool
    /// Whether `hasPendingMessage()` may stand in for the receive that would find the port
    /// drained, after the one message of a run that returns after a handled source. True
    /// for a port's ROUTER, which keeps what a peer sent before hanging up until it is read.
    /// False for a requester's connection: a connecting socket that processes a hang-up
    /// before reading drops what it still held, and its next step, a send, asks anyway.
    var canAskInsteadOfDraining: Bool { get }
    /// Receives one message without blocking and delivers it. `.empty` only once libzmq,
    /// having processed the socket's mailbox, found nothing waiting.
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
    /// Nothing waited, after libzmq processed the socket's mailbox: the port is drained.
    case empty
}

/// Pausing a port source and telling the loop of a send on one. Loop thread only.
extension ThreadRunLoop {
    /// Pauses (or resumes) a port without taking it out of its modes: while paused its
    /// descriptor is out of the poll set and none of its messages is delivered (a message
    /// stream's back-pressure). Returns false if the port is in no mode of this loop.
    @discardableResult
    package func setPaused(_ port: any PortSourceDriver, _ paused: Bool) -> Bool {
        assertOwnerThread()
        return ports.setPaused(port, paused, descriptors: &descriptors)
    }

    /// Whether the port is paused (see `setPaused(_:_:)`).
    func isPaused(_ port: any PortSourceDriver) -> Bool {
        assertOwnerThread()
        return ports.isPaused(port)
    }

    /// After a send on the socket of one of the loop's port sources (a requester's
    /// connection): libzmq's send may have taken the socket's pending commands, and with
    /// them the descriptor's signal that a reply arrived, so the socket is asked
    /// `ZMQ_EVENTS`: queued to be drained if a message waits, else off the ready queue.
    package func sentOnPortSource(_ port: any PortSourceDriver) {
        assertOwnerThread()
        ports.updateReadinessAfterSend(on: port)
    }
}
