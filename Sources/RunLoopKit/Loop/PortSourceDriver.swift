/// What the run loop needs of a port-based input source: a descriptor for the poll set
/// and a way to confirm and take one message.
///
/// ZeroMQ's `ZMQ_FD` is edge-triggered: it tells that the socket's state *may* have
/// changed, not that a message waits, and it may stay quiet while messages are queued.
/// So the loop never trusts the descriptor alone: after every wake-up it asks
/// `hasPendingMessage()` (`ZMQ_EVENTS`), and after every message it handles it asks again,
/// keeping ready ports in a queue until they are drained.
///
/// All calls are made on the loop's thread.
protocol PortSourceDriver: AnyObject {
    /// The descriptor to watch for readability (`ZMQ_FD`); never read or closed by the loop.
    var pollDescriptor: Int32 { get }
    /// Whether a message can be received now without blocking (`ZMQ_EVENTS & ZMQ_POLLIN`).
    func hasPendingMessage() -> Bool
    /// Receives one message without blocking and delivers it; returns whether one was handled.
    func handleOneMessage() -> Bool
    /// The source was removed from the loop's last mode or the loop was torn down.
    func detachedFromLoop()
}
