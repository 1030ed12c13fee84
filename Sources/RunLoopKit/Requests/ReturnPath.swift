/// Where a request came in, so that its reply goes back the same way: the routing id that
/// the port's ROUTER socket put before the request's frames, and whether the requester put
/// an empty delimiter frame after it (a REQ socket does; a DEALER does not), which the
/// reply must then carry too. See "Requests and replies" in `docs/wire-format.md`.
struct ReturnPath: Sendable, Equatable {
    /// The requester's routing id, as the port's ROUTER socket knows its connection.
    let routingID: RoutingID
    /// Whether an empty delimiter frame follows the routing id (a REQ requester).
    let hasDelimiter: Bool

    /// The frames of a message received on a ROUTER socket, split into where it came from
    /// and the wire message's own frames (which may be none, for the decoder to reject).
    /// Nil only for a message with no frame at all, which libzmq never hands out.
    static func split(_ frames: UnsafeBufferPointer<UnsafeRawBufferPointer>)
        -> (routingID: UnsafeRawBufferPointer, hasDelimiter: Bool, body: UnsafeBufferPointer<UnsafeRawBufferPointer>)? {
        guard let routingID = frames.first else { return nil }
        // A wire message's first frame, its header, is never empty: an empty frame here is
        // a REQ socket's delimiter.
        let hasDelimiter = frames.count > 1 && frames[1].isEmpty
        let body = UnsafeBufferPointer(rebasing: frames[(hasDelimiter ? 2 : 1)...])
        return (routingID, hasDelimiter, body)
    }
}
