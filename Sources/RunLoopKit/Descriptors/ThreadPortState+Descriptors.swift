import RunLoopSystem
import RunLoopWire

/// Messages with descriptors: theirs go first on the destination's side channel
/// (`<name>.fds` beside a named port's socket, one `DescriptorSender` per path, kept by
/// the thread), under a token the message then names.
extension ThreadPortState {
    /// Sends `message`'s descriptors on the destination's side channel (`<name>.fds` beside
    /// a named port's socket) under a fresh token, then the message, whose descriptor
    /// components name that token; revokes them if the message is not sent. A side channel
    /// whose send buffer is full (the port is that far behind) is waited on as the message
    /// would be, until the deadline (`descriptorsNotSent` after it).
    func sendCarryingDescriptors(_ message: LoopMessage, as kind: WireKind, correlationID: UInt64,
                                 to destination: RemotePort,
                                 deadline: () -> Deadline) throws(PortError) -> PortConnection {
        let address = destination.address
        if address.rawValue.hasPrefix("tcp://") { throw .descriptorsToAnotherHost(address) }
        // A named port of this process is reached over inproc; its side channel is its ipc name's.
        let raw = address.isInProcess ? PortDirectory.shared.ipcAlias(ofInProcess: address)?.rawValue ?? address.rawValue
            : address.rawValue
        guard raw.hasPrefix("ipc://"), raw.hasSuffix(".sock") else {
            throw .descriptorsNotSent(address, reason: "only a named port (ipc) receives descriptors")
        }
        let descriptors = message.descriptors.compactMap(\.descriptor)
        guard descriptors.count == message.descriptors.count else {
            throw .descriptorsNotSent(address, reason: "a descriptor was taken or closed")
        }
        guard descriptors.count <= Kernel.maxDescriptorsPerPacket else {
            throw .descriptorsNotSent(address, reason: "more than \(Kernel.maxDescriptorsPerPacket) descriptors")
        }
        let path = PortDirectory.Registration.descriptorPath(ofSocket: String(raw.dropFirst("ipc://".count)))
        let token: DescriptorToken
        let sender: DescriptorSender
        let before = deadline()
        do throws(DescriptorSendError) {
            if let known = descriptorSenders[path], let sent = try Self.attach(descriptors, on: known, before: before) {
                (sender, token) = (known, sent)
            } else { // none yet, or the port's owner closed it (it ended, or a new one took the name)
                descriptorSenders[path] = nil
                sender = try DescriptorSender(path: path)
                descriptorSenders[path] = sender
                token = try sender.attach(descriptors, before: before)
            }
        } catch {
            descriptorSenders[path] = nil // connect afresh next time (a new owner, a forked child)
            let reason = switch error {
            case .wouldBlock: "the port's descriptor queue stayed full until the deadline: it does not read"
            case .forkedChild: "the connection was made by the parent of this forked process"
            case .system(let failure): "no descriptor channel at \(path): \(failure)"
            }
            throw .descriptorsNotSent(address, reason: reason)
        }
        do {
            return try sendNamingDescriptors(DescriptorCarryingMessage(message: message, token: token), as: kind,
                                             correlationID: correlationID, to: destination, deadline: deadline)
        } catch {
            sender.revoke(token)
            throw error
        }
    }

    /// `sender.attach(descriptors)`, or nil when its connection failed (the receiver closed
    /// it) or is a forked parent's: the caller connects afresh. A full queue throws: a new
    /// connection would only get around the receiver's back-pressure.
    private static func attach(_ descriptors: [Int32], on sender: DescriptorSender,
                               before deadline: Deadline) throws(DescriptorSendError) -> DescriptorToken? {
        do {
            return try sender.attach(descriptors, before: deadline)
        } catch .system(_) {
            return nil
        } catch .forkedChild {
            return nil
        }
    }
}
