/// Why a run loop's port dropped a message rather than deliver it: the categories of
/// `LoopCounters.messagesDropped` and of the `reason` dimension of the drop metric.
///
/// Each drop is also logged at `.debug` on `runloopkit.port`, with the detail.
public enum MessageDropReason: String, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    /// ZeroMQ failed to hand over a message the port's socket announced.
    case receiveFailed
    /// Not a valid RunLoopKit wire message (bad header, frames, limits or addresses).
    case malformed
    /// A wire format version this receiver does not know (see docs/wire-format.md).
    case unsupportedVersion
    /// A message or request reached a port that has no handler.
    case noHandler
    /// A reply came for a request nobody waits for any more (it timed out, or is unknown).
    case lateReply
    /// A handler's reply could not be sent: the requester's connection holds as many
    /// replies as it may (`ZMQ_SNDHWM`) because the requester does not read them.
    case replyNotSent
    /// A handler's reply had nowhere to go: the requester's connection closed (it exited,
    /// was killed, or gave up) before the reply was ready. Dropped at once, never waited on.
    case requesterGone
    /// A reply to a request its requester cancelled: the requester waits for it no more.
    case replyCancelled
    /// A cancel for no request outstanding on its connection: the reply crossed it, or the
    /// peer named a request it never sent (it cannot cancel another's).
    case lateCancel
    /// A message whose descriptor components name descriptors its sender did not send to
    /// this port (a forged or unknown token, another process's), or that came where
    /// descriptors are not taken (a borrowing handler's port, a requester's connection):
    /// dropped whole, any descriptors it named closed.
    case unknownDescriptors

    public var description: String { rawValue }

    /// The position in `allCases`, for counters kept in a flat array.
    var index: Int {
        switch self {
        case .receiveFailed: 0
        case .malformed: 1
        case .unsupportedVersion: 2
        case .noHandler: 3
        case .lateReply: 4
        case .replyNotSent: 5
        case .requesterGone: 6
        case .replyCancelled: 7
        case .lateCancel: 8
        case .unknownDescriptors: 9
        }
    }
}
