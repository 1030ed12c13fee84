import RunLoopCore

/// Where the replies to a thread's requests go: `sendRequest`'s waiting list, or the
/// async requester's table. Each request names its receiver (`ReplyRoute`).
protocol ReplyReceiver: AnyObject {
    /// The mode the thread's loop services its connections in while replies are awaited.
    var replyMode: LoopMode { get }
    /// A reply came for `correlationID`; false if nothing waits for it (it is then dropped as
    /// late). Consumed: the reply is moved in, not copied (hot-path: borrow-not-copy (docs/optimization-tips.md)).
    func received(_ reply: consuming LoopMessage, for correlationID: UInt64) -> Bool
    /// The remote handler's failure came in place of the reply to `correlationID`; false if
    /// nothing waits for it (it is then dropped as late).
    func failed(_ failure: PortError, for correlationID: UInt64) -> Bool
    /// `connection` was lost (its peer died, or stopped answering heartbeats): fails every
    /// request sent on it whose reply this receiver still waits for with `failure`, at
    /// once; returns how many.
    func connectionLost(_ connection: PortConnection, _ failure: PortError) -> Int
}

/// Where the reply to a request goes, as the request says (`CFMessagePortSendRequest`'s
/// reply mode): one of its thread's `ReplyReceiver`s, named in the top byte of the
/// request's correlation id, which the reply carries back. The connection reads it from
/// the reply, so no receiver is swapped in and out of the thread, and a thread serves
/// blocking and async requests side by side. A peer that forges a reply's id reaches at
/// most a receiver of this thread that does not wait for that id: it is dropped as late.
struct ReplyRoute: Equatable {
    /// 0 for `sendRequest`'s waiting list, else the thread's receiver `index - 1`.
    let index: Int

    /// Where `RemotePort.sendRequest`'s replies go: the thread's `PendingReplies`.
    static let waiting = ReplyRoute(index: 0)
    /// The most receivers a thread routes to besides `waiting` (bits of `ReplyRoute.mask`).
    static let maxIndex = 63

    var isWaiting: Bool { index == 0 }

    private static let shift: UInt64 = 56

    /// The correlation id of the thread's `serial`-th request, naming this route. Serials
    /// start at 1, so the id is never 0.
    @inline(__always)
    func correlationID(_ serial: UInt64) -> UInt64 {
        (serial & ((1 << ReplyRoute.shift) - 1)) | (UInt64(truncatingIfNeeded: index) << ReplyRoute.shift)
    }

    /// The route a correlation id names.
    @inline(__always)
    static func index(of correlationID: UInt64) -> Int {
        Int(truncatingIfNeeded: correlationID >> shift)
    }

    /// Its bit in a set of routes.
    var mask: UInt64 { 1 << UInt64(index) }
}
