/// A port message with what the wire adds to it: what it is for and, for request/reply,
/// its correlation id. The sending path encodes one straight into a socket's frames and
/// the receiving path decodes one straight from them (`WireCodec`), with no
/// `WireMessage` in between; `WireMessage` is the codec's model for tests and the fuzzer.
struct PortEnvelope: Sendable, Equatable {
    var kind: WireKind
    /// 0 for plain messages; a request's id, echoed by its reply.
    var correlationID: UInt64
    var message: LoopMessage
    /// For a request a port received: the connection it came in on, for the reply.
    var returnPath: ReturnPath?

    init(_ kind: WireKind, _ message: LoopMessage, correlationID: UInt64 = 0, returnPath: ReturnPath? = nil) {
        self.kind = kind
        self.message = message
        self.correlationID = correlationID
        self.returnPath = returnPath
    }

    /// The codec's model of the same message.
    var wireMessage: WireMessage {
        message.wire(kind: kind, correlationID: correlationID)
    }
}
