/// What a wire message is for: the `kind` byte of the header.
@usableFromInline package enum WireKind: UInt8, Sendable {
    /// A one-way message.
    case message = 0
    /// A request: carries a fresh nonzero correlation id; its reply comes back over the same connection.
    case request = 1
    /// A reply to a request: its correlation id and message id are the request's.
    case reply = 2
    /// In place of a reply, when the request's handler failed: its correlation id and
    /// message id are the request's, and one data component says why (UTF-8).
    case failure = 3
    /// From a requester, over the connection a request went out on: it gave the request up
    /// (its task was cancelled, its wait timed out). Its correlation id and message id are
    /// the request's; no components. A port matches it against the requests that came in
    /// on that same connection only.
    case cancel = 4
    /// In place of a reply, when the server let go of the request's reply right without
    /// replying: its correlation id and message id are the request's; no components.
    case noReply = 5
    // Kind 6, a statistics query (`WireCodec.statisticsQueryKind`), is not a case: the
    // library answers it itself, on the rejected-kind path of a port's receive, so that no
    // switch that delivers to a handler can see it and the common message's dispatch costs
    // nothing more (docs/wire-format.md).
}

/// One component of a wire message.
package enum WireComponent: Equatable, Sendable {
    /// Bytes, carried as they are.
    case data([UInt8])
    /// A port, carried as the address of its receiving (ROUTER) socket.
    case port(address: String)
    /// A descriptor, sent beside the message (a port's side channel): the 16-byte token it
    /// was sent under and its index among that token's descriptors.
    case descriptor(token: [UInt8], index: UInt32)
    /// Bytes in a ring of shared memory its sender gave the receiving port (a port's side
    /// channel): the ring's 16-byte token, then where the bytes start in it and how many.
    case sharedData(token: [UInt8], start: UInt64, length: UInt64)
}

/// A RunLoopKit port message as it travels between processes and threads: see
/// `docs/wire-format.md`, and `WireCodec` for the encoding.
package struct WireMessage: Equatable, Sendable {
    package var kind: WireKind
    /// The application's message id (`PortMessage.msgid`).
    package var messageID: Int32
    /// 0 for plain messages; a request's id, echoed by its reply.
    package var correlationID: UInt64
    /// The address of the port to reply to, or `nil` for none.
    package var replyAddress: String?
    package var components: [WireComponent]

    package init(
        kind: WireKind = .message,
        messageID: Int32,
        correlationID: UInt64 = 0,
        replyAddress: String? = nil,
        components: [WireComponent] = []
    ) {
        self.kind = kind
        self.messageID = messageID
        self.correlationID = correlationID
        self.replyAddress = replyAddress
        self.components = components
    }
}
