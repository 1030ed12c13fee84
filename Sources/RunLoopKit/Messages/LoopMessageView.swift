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

    /// The message `PortEnvelope.check` read from the wire message's own frames and
    /// checked (the format and every address).
    init(_ checked: consuming PortEnvelope.Checked, sender: MessageSender?) {
        header = checked.header
        id = header.messageID
        if case .request = header.kind { isRequest = true } else { isRequest = false }
        replyPort = checked.replyPort
        self.sender = sender
    }

    /// How many components the message has.
    public var componentCount: Int { header.componentCount }

    /// Whether component `index` is a port (else it is data). O(`index`): the components
    /// are found by walking the message's component table.
    public func isPort(at index: Int) -> Bool {
        header.component(at: index).isPort
    }

    /// The bytes of data component `index`, valid until the handler returns; nil for a
    /// port. O(`index`), as `isPort(at:)`.
    public func data(at index: Int) -> UnsafeRawBufferPointer? {
        let component = header.component(at: index)
        return component.isPort ? nil : component.bytes
    }

    /// Port component `index` (made on each call), or nil for data. O(`index`), as `isPort(at:)`.
    public func port(at index: Int) -> RemotePort? {
        let component = header.component(at: index)
        return component.isPort ? RemotePort(checkedAddress: component.bytes) : nil
    }

    /// The bytes of the first data component, if any, valid until the handler returns.
    public var firstData: UnsafeRawBufferPointer? {
        guard header.componentCount > 0 else { return nil }
        let first = header.firstComponent // the common case, without a walk of the table
        if !first.isPort { return first.bytes }
        for component in header.components where !component.isPort { return component.bytes }
        return nil
    }

    /// The message, copied: what a `LocalPort.Handler` would have been given.
    public var owned: LoopMessage {
        let components = header.components.map(LoopMessage.Component.init(received:))
        var message = LoopMessage(id: id, components: components, replyPort: replyPort)
        message.sender = sender
        return message
    }
}
