import RunLoopWire

/// A port message (`NSPortMessage` / `CFMessagePort`'s data): an id, components that are
/// byte buffers or ports, and the port to reply to.
public struct LoopMessage: Sendable, Equatable {
    public enum Component: Sendable, Equatable {
        case data([UInt8])
        /// A port the receiver can send to (how the check-in hands over a worker's port).
        case port(RemotePort)
        /// An open descriptor, for a named port of this host (ipc): the receiver's message
        /// holds a descriptor of its own, closed with the message unless its handler takes it.
        case descriptor(MessageDescriptor)
    }

    /// The message id (`msgid`); RunLoopKit gives it no meaning.
    public var id: Int32
    public var components: [Component]
    /// The port to reply to (`sendPort` of the guide's check-in), if any.
    public var replyPort: RemotePort?
    /// Who sent it, as its connection proved it, on a message a port received over ipc or
    /// tcp (see `MessageSender`); nil on messages from this process and on those being
    /// sent (it is never sent: the receiver reads it from the connection). Not part of `==`,
    /// which compares what a message says, not where it came from.
    public var sender: MessageSender? {
        get { senderBox?.sender }
        set { senderBox = newValue.map(MessageSenderBox.init) }
    }
    /// `sender`, boxed: most messages have none, and every copy of a message copies one
    /// reference for it instead of the enum and its string. A port's receive path sets the
    /// box its reader keeps for the connection, so a sender costs no allocation per message.
    var senderBox: MessageSenderBox?

    public static func == (lhs: LoopMessage, rhs: LoopMessage) -> Bool {
        lhs.id == rhs.id && lhs.components == rhs.components && lhs.replyPort == rhs.replyPort
    }

    /// The data components, in order.
    public var data: [[UInt8]] {
        components.compactMap { if case .data(let bytes) = $0 { bytes } else { nil } }
    }

    /// The port components, in order.
    public var ports: [RemotePort] {
        components.compactMap { if case .port(let port) = $0 { port } else { nil } }
    }

    /// The descriptor components, in order.
    public var descriptors: [MessageDescriptor] {
        components.compactMap { if case .descriptor(let descriptor) = $0 { descriptor } else { nil } }
    }

    /// The first data component, if any. Found in place: no array of the data components
    /// is made for it, as `data.first` would (`LoopMessageView.firstData` is its borrowing
    /// twin).
    public var firstData: [UInt8]? {
        for case .data(let bytes) in components { return bytes }
        return nil
    }

    /// The first data component as UTF-8 text, if it is valid UTF-8 (`firstData`, read).
    public var text: String? {
        firstData.flatMap { String(validating: $0, as: UTF8.self) }
    }
}

// The initializers are in an extension, so that the receive path has the memberwise one
// (with `senderBox`). hot-path: memberwise-init (docs/optimization-tips.md)
extension LoopMessage {
    public init(id: Int32, components: [Component] = [], replyPort: RemotePort? = nil) {
        self.init(id: id, components: components, replyPort: replyPort, senderBox: nil)
    }

    /// A message with one data component holding `text` in UTF-8.
    public init(id: Int32, text: String, replyPort: RemotePort? = nil) {
        self.init(id: id, components: [.data(Array(text.utf8))], replyPort: replyPort)
    }
}

extension LoopMessage {
    /// The wire form, with `kind` and `correlationID` for request/reply; descriptor
    /// components under `descriptorToken` (all zero, which names none, if nil).
    func wire(kind: WireKind, correlationID: UInt64 = 0, descriptorToken: DescriptorToken? = nil) -> WireMessage {
        var ordinal: UInt32 = 0
        return WireMessage(
            kind: kind, messageID: id, correlationID: correlationID,
            replyAddress: replyPort?.address.rawValue,
            components: components.map { component in
                switch component {
                case .data(let bytes): return .data(bytes)
                case .port(let port): return .port(address: port.address.rawValue)
                case .descriptor:
                    defer { ordinal += 1 }
                    return .descriptor(token: (descriptorToken ?? DescriptorToken(high: 0, low: 0)).bytes, index: ordinal)
                }
            }
        )
    }
}
