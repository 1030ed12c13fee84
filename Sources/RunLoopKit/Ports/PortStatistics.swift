import Synchronization

/// Counters of a port's traffic. Any thread.
public final class PortStatistics: Sendable {
    private let received = Atomic<Int>(0)
    private let dropped = Atomic<Int>(0)
    private let failedReplies = Atomic<Int>(0)
    private let handlerFailures = Atomic<Int>(0)
    private let refusedClients = Atomic<Int>(0)

    /// Messages delivered to the handler.
    public var messagesReceived: Int { received.load(ordering: .relaxed) }
    /// Messages dropped because they were malformed (see the log for each reason).
    public var messagesDropped: Int { dropped.load(ordering: .relaxed) }
    /// Replies that could not be sent back (the requester was gone, or did not read its replies).
    public var repliesFailed: Int { failedReplies.load(ordering: .relaxed) }

    /// Errors thrown by the port's handler (each reported; the loop went on).
    public var handlerErrors: Int { handlerFailures.load(ordering: .relaxed) }

    /// Security handshakes refused because the client's CURVE key is not on the port's
    /// allow-list (`PortClientAllowList`): each attempt counts (a RunLoopKit sender makes
    /// two before it reports `notAuthorized`). None of their messages reached the port.
    public var clientsRefused: Int { refusedClients.load(ordering: .relaxed) }

    func countRefusedClient() { refusedClients.add(1, ordering: .relaxed) }
    func countHandlerError() { handlerFailures.add(1, ordering: .relaxed) }
    func countReceived() { received.add(1, ordering: .relaxed) }
    func countDropped() { dropped.add(1, ordering: .relaxed) }
    func countFailedReply() { failedReplies.add(1, ordering: .relaxed) }
}
