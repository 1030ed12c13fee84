import RunLoopWire

/// A port message read where libzmq received it, lent to a `LocalPort.BorrowingHandler`
/// for the duration of one call: its id, its components' bytes and its reply port, with
/// no copy, no allocation and no reference counted per message (a port component or the
/// reply port is made into a `RemotePort` only when asked for).
///
/// Noncopyable and borrowed, so the view itself cannot outlive the call. The buffers it
/// hands out are valid only until the handler returns: copy what must outlive it
/// (`owned` copies the whole message).
public struct LoopMessageView: ~Copyable {
    /// The message id (`msgid`).
    public let id: Int32
    /// Whether the message is a request, whose handler's return value is its reply.
    public let isRequest: Bool
    /// The port to reply to, if any (the sender's own port in a check-in).
    public let replyPort: RemotePort?
    /// Who sent it, as its connection proved it (see `LoopMessage.sender`).
    public let sender: MessageSender?
    private let header: WireCodec.CheckedHeader
    private let frames: UnsafeBufferPointer<UnsafeRawBufferPointer>

    /// `frames` are the wire message's own (header, reply port, components), already
    /// checked (`WireCodec.checkedHeader` and every address).
    init(header: WireCodec.CheckedHeader, frames: UnsafeBufferPointer<UnsafeRawBufferPointer>, replyPort: RemotePort?,
         sender: MessageSender?) {
        id = header.messageID
        if case .request = header.kind { isRequest = true } else { isRequest = false }
        self.replyPort = replyPort
        self.sender = sender
        self.header = header
        self.frames = frames
    }

    /// How many components the message has.
    public var componentCount: Int { header.componentCount }

    /// Whether component `index` is a port (else it is data).
    public func isPort(at index: Int) -> Bool {
        precondition(index >= 0 && index < componentCount, "component \(index) of \(componentCount)")
        return header.isPort(index)
    }

    /// The bytes of data component `index`, valid until the handler returns; nil for a port.
    public func data(at index: Int) -> UnsafeRawBufferPointer? {
        isPort(at: index) ? nil : frames[2 + index]
    }

    /// Port component `index` (made on each call), or nil for data.
    public func port(at index: Int) -> RemotePort? {
        guard isPort(at: index) else { return nil }
        return RemotePort(PortAddress(unchecked: String(decoding: frames[2 + index], as: UTF8.self)))
    }

    /// The bytes of the first data component, if any, valid until the handler returns.
    public var firstData: UnsafeRawBufferPointer? {
        for index in 0..<componentCount where !header.isPort(index) { return frames[2 + index] }
        return nil
    }

    /// The message, copied: what a `LocalPort.Handler` would have been given.
    public var owned: LoopMessage {
        let components = (0..<componentCount).map { index -> LoopMessage.Component in
            if let port = port(at: index) { .port(port) } else { .data([UInt8](frames[2 + index])) }
        }
        var message = LoopMessage(id: id, components: components, replyPort: replyPort)
        message.sender = sender
        return message
    }
}
