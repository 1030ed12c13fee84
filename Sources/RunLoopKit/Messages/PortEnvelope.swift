import Glibc
import RunLoopCore
import RunLoopWire

/// A port message with what the wire adds to it: what it is for and, for request/reply,
/// its correlation id. The sending path encodes one straight into a socket's frames and
/// the receiving path decodes one straight from them (`WireCodec`), with no
/// `WireMessage` in between; `WireMessage` is the codec's model for tests and the fuzzer.
struct PortEnvelope: Sendable, Equatable {
    var kind: WireKind
    /// 0 for plain messages; a request's id, echoed by its reply.
    var correlationID: UInt64
    var message: LoopMessage
    /// For a request (or a cancel) a port received: the connection it came in on, for the
    /// reply (or to find the request it cancels).
    var returnPath: ReturnPath?

    /// The codec's model of the same message.
    var wireMessage: WireMessage {
        message.wire(kind: kind, correlationID: correlationID)
    }
}

extension PortEnvelope {
    /// Moves the message out, leaving an empty one (no allocation: an empty array is shared).
    @inline(__always)
    mutating func takeMessage() -> LoopMessage {
        var taken = LoopMessage(id: message.id)
        swap(&taken, &message)
        return taken
    }
}

// The initializer is in an extension so that the memberwise one is there for the receive
// path (see `LoopMessage`'s).
extension PortEnvelope {
    init(_ kind: WireKind, _ message: LoopMessage, correlationID: UInt64 = 0, returnPath: ReturnPath? = nil) {
        self.init(kind: kind, correlationID: correlationID, message: message, returnPath: returnPath)
    }
}

extension PortEnvelope {
    /// The message in `frames` (the wire message's own, after any routing id), checked
    /// against the format and `limits` (`WireCodec.checkedHeader`, then the addresses in
    /// frame order), read where libzmq put the frames: only each data component is
    /// copied, once, into the `LoopMessage` delivered.
    ///
    /// - Parameters:
    ///   - replyAddresses: the receiving port's last validated reply address, reused when
    ///     the frame holds the same bytes.
    ///   - route: where the message came in, for a port's ROUTER socket: a request keeps
    ///     it as its `returnPath`.
    ///   - sender: who sent it (`MessageSenderReader`), read while the frames are held. The
    ///     envelope is made whole here, with the memberwise initializers: one set on it
    ///     afterwards, or an explicit initializer, makes the optimizer copy and destroy it
    ///     through its value witnesses, some 300 instructions a message.
    static func decode(frames: UnsafeBufferPointer<UnsafeRawBufferPointer>, limits: WireLimits,
                       replyAddresses: inout ReplyAddressCache,
                       route: (routingID: UnsafeRawBufferPointer, hasDelimiter: Bool)? = nil,
                       sender: MessageSenderBox? = nil,
                       storage: inout ReceivedMessageStorage,
                       descriptors: DescriptorReceiverSlot? = nil)
        throws(WireFormatError) -> PortEnvelope {
        let checked = try check(frames, limits: limits, replyAddresses: &replyAddresses)
        let header = checked.header
        let components = header.claimCount == 0 ? decodeComponents(header, storage: &storage)
            : try claimComponents(header, from: descriptors?.receiver, sender: sender?.sender)
        var returnPath: ReturnPath?
        switch header.kind { // a pattern, not the cross-module `==`
        case .request, .cancel:
            if let route { returnPath = ReturnPath(routingID: RoutingID(route.routingID), hasDelimiter: route.hasDelimiter) }
        case .message, .reply, .failure, .noReply:
            break
        }
        return PortEnvelope(kind: header.kind, correlationID: header.correlationID,
                            message: LoopMessage(id: header.messageID, components: components,
                                                 replyPort: checked.replyPort, senderBox: sender),
                            returnPath: returnPath)
    }

    /// Checks every rule of the format on `frames` where libzmq put them: the frames and
    /// the component table (`WireCodec.checkedHeader`), the reply port (made through
    /// `replyAddresses`, which reuses the last one for the same bytes), then each port
    /// component's address, in place (no string is made). What both a port's owned and
    /// borrowed deliveries, and a requester's connection, receive through.
    @inline(__always) // so that no `Checked` is returned, copied and destroyed per message
    static func check(_ frames: UnsafeBufferPointer<UnsafeRawBufferPointer>, limits: WireLimits,
                      replyAddresses: inout ReplyAddressCache) throws(WireFormatError) -> Checked {
        let header = try WireCodec.checkedHeader(frames, limits: limits)
        var replyPort: RemotePort?
        if !header.replyPort.isEmpty {
            guard let port = replyAddresses.port(at: header.replyPort, maxBytes: limits.maxAddressBytes) else {
                throw .replyAddressInvalid
            }
            replyPort = port
        }
        if header.portCount > 0 {
            var index = 0
            for component in header.components {
                if component.isPort, !WireCodec.isValidAddress(component.bytes, maxBytes: limits.maxAddressBytes) {
                    throw .addressInvalid(component: index)
                }
                index += 1
            }
        }
        return Checked(header: header, replyPort: replyPort)
    }

    /// A message that passed `check`: its header and its reply port. A struct, not a tuple:
    /// the runtime copies and destroys a tuple holding a reference through its generic
    /// tuple witnesses, about a hundred instructions per message here.
    struct Checked {
        let header: WireCodec.CheckedHeader
        let replyPort: RemotePort?
    }

    /// The components (checked by `check`), each data component copied once: the common
    /// message, one data component, into `storage`'s buffers.
    private static func decodeComponents(_ header: WireCodec.CheckedHeader,
                                         storage: inout ReceivedMessageStorage) -> [LoopMessage.Component] {
        if header.componentCount == 1 {
            let component = header.firstComponent
            if !component.isPort { return storage.oneDataComponent(component.bytes) }
            return [LoopMessage.Component(received: component)]
        }
        var components: [LoopMessage.Component] = []
        components.reserveCapacity(header.componentCount)
        for component in header.components { components.append(LoopMessage.Component(received: component)) }
        return components
    }

    /// The components of a message with descriptor or shared data components, each
    /// descriptor claimed from `receiver` (the port's side channel) under its token, as
    /// sent by `sender`'s process (this one's for a message with no sender: one that came
    /// over inproc), and each shared data component copied once out of the ring its note
    /// names, then given back. Throws `descriptorsNotFound` when a token names nothing from
    /// that process, an index nothing under it, or a note bytes outside its ring; without
    /// a receiver (a requester's connection, a borrowing port), claims what it can and
    /// throws. Descriptors claimed and not delivered close.
    static func claimComponents(_ header: WireCodec.CheckedHeader, from receiver: DescriptorReceiver?,
                                sender: MessageSender?) throws(WireFormatError) -> [LoopMessage.Component] {
        let pid = process(of: sender)
        var claimed: [DescriptorToken: [MessageDescriptor]] = [:]
        var components: [LoopMessage.Component] = []
        components.reserveCapacity(header.componentCount)
        var index = 0
        var failed: Int?
        for component in header.components {
            defer { index += 1 }
            if component.isShared {
                guard let receiver, let pid, let (ring, note, bytes) = sharedBytes(of: component, in: receiver, from: pid) else {
                    failed = failed ?? index
                    continue
                }
                components.append(.data([UInt8](bytes)))
                ring.giveBack(endingAt: note.start &+ note.length)
                continue
            }
            guard component.isDescriptor else {
                components.append(LoopMessage.Component(received: component))
                continue
            }
            let reference = component.descriptorReference
            guard let token = DescriptorToken(reference.token) else { failed = failed ?? index; continue }
            if claimed[token] == nil, let receiver, let pid { claimed[token] = receiver.take(token, from: pid) ?? [] } // asked once
            guard let descriptors = claimed[token], Int(reference.index) < descriptors.count else {
                failed = failed ?? index
                continue
            }
            components.append(.descriptor(descriptors[Int(reference.index)]))
        }
        if let failed { throw .descriptorsNotFound(component: failed) }
        return components
    }

    /// The bytes a shared data component's note names, where they lie in the ring it
    /// names from process `pid` (`DescriptorReceiver.ring(_:from:)`, `MappedRing.resolve`),
    /// counted (`sharedComponents`); nil for a note naming nothing, or a fence.
    static func sharedBytes(of component: WireCodec.ComponentBytes, in receiver: DescriptorReceiver,
                            from pid: pid_t) -> (MappedRing, SharedNote, UnsafeRawBufferPointer)? {
        guard let note = SharedNote(component.sharedReference), let ring = receiver.ring(note.token, from: pid) else {
            return nil
        }
        guard let bytes = ring.resolve(note) else {
            if note.length == 0 { receiver.countFence() }
            return nil
        }
        receiver.countSharedComponent(queued: false)
        return (ring, note, bytes)
    }

    /// Whether `frames` (as a port's ROUTER received them) are a fence: a plain message
    /// whose one component is a shared data note of no bytes (`MappedRing.resolve`), sent
    /// by a sender before its next message over ZeroMQ once it queued notes. Not a message:
    /// it is not delivered, nor counted as a drop.
    static func isFence(_ frames: UnsafeBufferPointer<UnsafeRawBufferPointer>) -> Bool {
        guard let (_, _, body) = ReturnPath.split(frames),
              let header = try? WireCodec.checkedHeader(body, limits: .default), header.componentCount == 1,
              case .message = header.kind else { return false }
        let component = header.firstComponent
        return component.isShared && component.sharedReference.length == 0
    }

    /// The process a message came from, as its connection proved it: this one for a
    /// message with no sender (inproc); nil over tcp (no process of this host).
    static func process(of sender: MessageSender?) -> pid_t? {
        switch sender {
        case .none: getpid()
        case .process(_, _, let pid): pid
        case .curveKey: nil
        }
    }

    /// What a drop of a message the decoder rejected with `error` is counted as.
    static func dropReason(rejecting error: WireFormatError) -> MessageDropReason {
        switch error {
        case .unsupportedVersion: .unsupportedVersion
        case .descriptorsNotFound: .unknownDescriptors
        default: .malformed
        }
    }
}

extension LoopMessage.Component {
    /// The component a checked message holds (`PortEnvelope.check`), a data component's
    /// bytes copied once: what the owned receive and `LoopMessageView.owned` both make.
    init(received component: WireCodec.ComponentBytes) {
        self = component.isPort ? .port(RemotePort(checkedAddress: component.bytes)) : .data([UInt8](component.bytes))
    }
}

extension RemotePort {
    /// The port whose address `bytes` hold, already checked (`WireCodec.isValidAddress`).
    init(checkedAddress bytes: UnsafeRawBufferPointer) {
        self.init(PortAddress(unchecked: String(decoding: bytes, as: UTF8.self)))
    }
}
