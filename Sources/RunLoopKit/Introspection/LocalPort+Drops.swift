/// Dropping a message: counted on the port, on its owner's loop and in metrics, and
/// logged at `.debug` (a peer can send any number of bad messages, so never louder).
extension LocalPort {
    /// Drops a message for `reason`; `detail` is built only if `.debug` is enabled.
    /// Owner thread (where the port's messages are delivered).
    func drop(_ reason: MessageDropReason, _ detail: @autoclosure () -> String) {
        if reason == .replyNotSent || reason == .requesterGone {
            statistics.countFailedReply()
        } else {
            statistics.countDropped()
        }
        ownerLoop?.instruments.messageDropped(reason)
        RunLoopKitLog.port.debug("message dropped", metadata: [
            "port": "\(self)", "reason": "\(reason)", "detail": "\(detail())",
        ])
    }
}
