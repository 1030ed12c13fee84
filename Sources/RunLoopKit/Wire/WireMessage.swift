/// What a wire message is for: the `kind` byte of the header.
enum WireKind: UInt8, Sendable {
    /// A one-way message.
    case message = 0
    /// A request: carries a fresh nonzero correlation id; its reply comes back over the same connection.
    case request = 1
    /// A reply to a request: its correlation id and message id are the request's.
    case reply = 2
}

/// One component of a wire message.
enum WireComponent: Equatable, Sendable {
    /// Bytes, carried as they are.
    case data([UInt8])
    /// A port, carried as the address of its receiving (ROUTER) socket.
    case port(address: String)
}

/// A RunLoopKit port message as it travels between processes and threads: see
/// `docs/wire-format.md`, and `WireCodec` for the encoding.
struct WireMessage: Equatable, Sendable {
    var kind: WireKind
    /// The application's message id (`PortMessage.msgid`).
    var messageID: Int32
    /// 0 for plain messages; a request's id, echoed by its reply.
    var correlationID: UInt64
    /// The address of the port to reply to, or `nil` for none.
    var replyAddress: String?
    var components: [WireComponent]

    init(
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
