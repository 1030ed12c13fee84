import Glibc

/// The right to answer one request, once (Mach's send-once right, XPC's
/// `xpc_dictionary_create_reply`): what a `PortHandler.deferring` handler gets with each
/// request, to reply when the work is done rather than before the handler returns.
///
/// Noncopyable and `Sendable`: it moves to any thread, task, actor, worker or pool, and
/// replying consumes it, so the compiler rejects a second reply. A right that is dropped
/// unused answers the requester at once with a no reply (`PortError.noReply` on its side),
/// never a timeout. To move a right into an escaping closure, hand it over with
/// `perform(moving:)` (a loop, a worker, a pool) or `PortRequest.takeRight()`.
///
/// The answer is sent from the port's owner thread: replying from another thread hands it
/// to the owner's loop, which sends it in its next pass whatever its mode, without either
/// side waiting. A right that outlives its port, or its requester, fails cleanly: its
/// answer is dropped and counted (`PortStatistics.repliesFailed`, logged at `.debug`).
///
/// A requester that gives its request up (its task is cancelled, its wait times out)
/// tells the port; the right then reports `isCancelled`, runs its cancellation handlers,
/// and its reply is dropped and counted (`replyCancelled`), never delivered.
public struct ReplyRight: ~Copyable, Sendable {
    let request: OutstandingRequest

    init(_ request: OutstandingRequest) {
        self.request = request
    }

    /// The request's message id (the reply carries it whatever the reply's own id is).
    public var requestID: Int32 { request.requestID }

    /// Whether the requester gave the request up, or its connection is gone: whatever is
    /// still sent for it is dropped. Any thread.
    public var isCancelled: Bool { request.isCancelled }

    /// Runs `handler` when the requester gives the request up or its connection goes:
    /// on the port's owner thread, in the loop's pass that learns it; at once, on the
    /// calling thread, if that happened already. Not run once the request is answered.
    /// Any thread.
    public func onCancel(_ handler: @escaping @Sendable () -> Void) {
        request.onCancel(handler)
    }

    /// Answers the request with `reply` (sent with the request's id, whatever `reply.id` is).
    /// Any thread.
    public consuming func reply(_ reply: LoopMessage) {
        request.settle(.reply(reply))
    }

    /// Answers the request with a failure: its requester gets
    /// `PortError.remoteHandlerFailed` with `error`'s description (at most 1,024 bytes).
    /// Any thread.
    public consuming func fail(_ error: any Error) {
        request.settle(.failure(LocalPort.failureReason(error)))
    }

    deinit {
        request.rightDropped()
    }
}
