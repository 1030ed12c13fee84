import Synchronization

/// Counters of a port's traffic. Any thread reads them.
public final class PortStatistics: Sendable {
    // Written by the port's owner thread only, where its messages are delivered: each
    // count is a relaxed load and store, not a read-modify-write (a locked instruction per
    // message, a few percent of a small message's delivery). Readers see each value whole.
    private let received = Atomic<Int>(0)
    private let dropped = Atomic<Int>(0)
    private let failedReplies = Atomic<Int>(0)
    private let handlerFailures = Atomic<Int>(0)
    private let cancelledRequests = Atomic<Int>(0)
    private let refusedQueries = Atomic<Int>(0)
    // Written by whichever thread learns of the refusal: a read-modify-write.
    private let refusedClients = Atomic<Int>(0)
    // Given on the owner thread, settled there or (once its loop is gone) on any: read-modify-writes.
    private let outstandingRights = Atomic<Int>(0)

    /// Messages and requests delivered to the handler (what is dropped is not counted here).
    public var messagesReceived: Int { received.load(ordering: .relaxed) }
    /// Messages dropped: malformed, a reply or failure sent to the port (replies come back
    /// on the requester's connection, never to a port), or come while the port had no
    /// handler (see the log, at `.debug`, for each reason).
    public var messagesDropped: Int { dropped.load(ordering: .relaxed) }
    /// Replies that could not be sent back (the requester was gone, or did not read its replies).
    public var repliesFailed: Int { failedReplies.load(ordering: .relaxed) }

    /// Errors thrown by the port's handler (each reported; the loop went on).
    public var handlerErrors: Int { handlerFailures.load(ordering: .relaxed) }

    /// Security handshakes refused because the client's CURVE key is not on the port's
    /// allow-list (`PortClientAllowList`): each attempt counts (a RunLoopKit sender makes
    /// two before it reports `notAuthorized`). None of their messages reached the port.
    public var clientsRefused: Int { refusedClients.load(ordering: .relaxed) }

    /// Reply rights given to a `PortHandler.deferring` handler and not answered yet (nor
    /// dropped): held by the program, its workers or its tasks.
    public var rightsOutstanding: Int { outstandingRights.load(ordering: .relaxed) }

    /// Requests whose requester gave them up (a cancel from its connection) or whose
    /// connection went while their rights were outstanding. Counted once the right reports
    /// it: whoever reads a count sees that many rights cancelled.
    public var requestsCancelled: Int { cancelledRequests.load(ordering: .acquiring) }

    /// Statistics queries (wire kind 6) dropped unanswered because their peer did not prove
    /// to run as this process's user (over tcp, or another uid over ipc); each is counted in
    /// `messagesDropped` too.
    public var statisticsQueriesRefused: Int { refusedQueries.load(ordering: .relaxed) }

    func rightGiven() { outstandingRights.add(1, ordering: .relaxed) }
    func rightSettled() { outstandingRights.subtract(1, ordering: .relaxed) }
    /// After the request's `cancel()`: released, so that a reader of the count sees its flag.
    func countCancelledRequest() {
        cancelledRequests.store(cancelledRequests.load(ordering: .relaxed) + 1, ordering: .releasing)
    }
    func countRefusedClient() { refusedClients.add(1, ordering: .relaxed) }
    // The owner thread's counts.
    func countHandlerError() { Self.increment(handlerFailures) }
    func countReceived() { Self.increment(received) }
    func countDropped() { Self.increment(dropped) }
    func countFailedReply() { Self.increment(failedReplies) }
    func countRefusedQuery() { Self.increment(refusedQueries) }

    /// Adds 1 to a counter only the owner thread writes: a relaxed load and store.
    @inline(__always)
    private static func increment(_ counter: borrowing Atomic<Int>) {
        counter.store(counter.load(ordering: .relaxed) + 1, ordering: .relaxed)
    }
}
