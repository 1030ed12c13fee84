/// How a port hands its messages to the program (`CFMessagePort`'s callout): one handler a
/// port, chosen by how it takes each message and how it answers a request.
///
/// Runs on the port's owner thread, in its loop's passes. A handler may throw: the error
/// is reported (`LocalPort.onHandlerError`), the loop goes on, and a request whose
/// handler threw (before its right was used) is answered with the failure: its requester
/// gets `PortError.remoteHandlerFailed` with the error's description.
public enum PortHandler {
    /// Each message copied out. For a request, the return value is the reply (an empty
    /// reply for nil); for other messages it is ignored. The simple case, and the fastest.
    case returning(LocalPort.Handler)
    /// Each message lent where libzmq received it, for the duration of the call
    /// (`LoopMessageView`): no allocation per message. Answers as `returning` does.
    case borrowing(LocalPort.BorrowingHandler)
    /// Each message copied out with, for a request, its `ReplyRight` (nil for other
    /// messages): the handler keeps the right, hands it to a worker, a pool, a task, and
    /// the request is answered when the right is used, from any thread. A right dropped
    /// unused answers with a no reply at once.
    case deferring(LocalPort.DeferringHandler)
}
