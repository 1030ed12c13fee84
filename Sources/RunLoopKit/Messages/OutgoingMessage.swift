import RunLoopWire
import RunLoopZMQ

/// What goes out on a connection as one wire message: a `LoopMessage`, or the bytes of a
/// one-component message sent without building one (`OutgoingBytes`).
protocol OutgoingMessage {
    /// Sends the message on `socket` as `kind`: see `ZMQSocket.send(_:as:correlationID:dontWait:via:)`.
    func send(on socket: ZMQSocket, as kind: WireKind, correlationID: UInt64, dontWait: Bool) throws(SystemCallError) -> Bool
    /// Throws `PortError.messageTooLarge` for a data component that no port would take
    /// (see `LoopMessage.checkSize()`); returns whether the message carries descriptors.
    @discardableResult
    func checkSize() throws(PortError) -> Bool
}

extension LoopMessage: OutgoingMessage {
    func send(on socket: ZMQSocket, as kind: WireKind, correlationID: UInt64, dontWait: Bool) throws(SystemCallError) -> Bool {
        try socket.send(self, as: kind, correlationID: correlationID, dontWait: dontWait)
    }
}

/// A message of one data component, its bytes borrowed from the caller for the send.
struct OutgoingBytes: OutgoingMessage {
    let id: Int32
    let bytes: UnsafeRawBufferPointer

    func send(on socket: ZMQSocket, as kind: WireKind, correlationID: UInt64, dontWait: Bool) throws(SystemCallError) -> Bool {
        try socket.send(id: id, data: bytes, as: kind, correlationID: correlationID, dontWait: dontWait)
    }

    @inline(__always) @discardableResult
    func checkSize() throws(PortError) -> Bool {
        let limit = WireLimits.default.maxFrameBytes
        if bytes.count > limit { throw .messageTooLarge(size: bytes.count, limit: limit) }
        return false
    }
}

/// A message whose descriptors were sent on the destination's side channel under `token`:
/// its descriptor components go as that token and their index.
struct DescriptorCarryingMessage: OutgoingMessage {
    let message: LoopMessage
    let token: DescriptorToken

    func send(on socket: ZMQSocket, as kind: WireKind, correlationID: UInt64, dontWait: Bool) throws(SystemCallError) -> Bool {
        try socket.send(message, as: kind, correlationID: correlationID, dontWait: dontWait, descriptorToken: token)
    }

    /// Checked before its descriptors were sent.
    func checkSize() throws(PortError) -> Bool { false }
}
