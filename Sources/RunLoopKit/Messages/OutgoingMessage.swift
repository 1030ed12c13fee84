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
    /// The size of the message's data when it is one data component and nothing else (no
    /// reply port): what may travel in shared memory (`SharedRingLayout.gate`); else 0.
    var soleDataCount: Int { get }
    /// Copies that one data component's bytes (`soleDataCount` of them) into `buffer`.
    func copySoleData(into buffer: UnsafeMutableRawBufferPointer)
    /// The message id, for a message of one data component sent in shared memory.
    var soleDataID: Int32 { get }
}

extension OutgoingMessage {
    var soleDataCount: Int { 0 }
    var soleDataID: Int32 { 0 }
    func copySoleData(into buffer: UnsafeMutableRawBufferPointer) { preconditionFailure("no sole data component") }
}

extension LoopMessage: OutgoingMessage {
    func send(on socket: ZMQSocket, as kind: WireKind, correlationID: UInt64, dontWait: Bool) throws(SystemCallError) -> Bool {
        try socket.send(self, as: kind, correlationID: correlationID, dontWait: dontWait)
    }

    @inline(__always)
    var soleDataCount: Int {
        guard replyPort == nil, components.count == 1, case .data(let bytes) = components[0] else { return 0 }
        return bytes.count
    }

    var soleDataID: Int32 { id }

    func copySoleData(into buffer: UnsafeMutableRawBufferPointer) {
        guard case .data(let bytes) = components[0] else { preconditionFailure("no sole data component") }
        bytes.withUnsafeBytes { buffer.copyMemory(from: $0) }
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

    var soleDataCount: Int { bytes.count }
    var soleDataID: Int32 { id }

    func copySoleData(into buffer: UnsafeMutableRawBufferPointer) { buffer.copyMemory(from: bytes) }
}

/// A message of one data component in shared memory: its note (`SharedNote`), naming where
/// its bytes lie in a ring the destination maps (`ThreadPortState.sendShared`).
struct SharedNoteMessage: OutgoingMessage {
    let id: Int32
    let note: SharedNote

    func send(on socket: ZMQSocket, as kind: WireKind, correlationID: UInt64, dontWait: Bool) throws(SystemCallError) -> Bool {
        try withUnsafeTemporaryAllocation(byteCount: WireCodec.sharedComponentSize, alignment: 8) { buffer throws(SystemCallError) in
            note.write(into: buffer)
            return try socket.send(id: id, sharedNote: UnsafeRawBufferPointer(buffer), as: kind, correlationID: correlationID,
                                   dontWait: dontWait)
        }
    }

    /// Its bytes were checked before they went into the ring.
    func checkSize() throws(PortError) -> Bool { false }
}

/// A message of one data component that the caller wrote in place, in the frames libzmq
/// sends (`RemotePort.send(id:byteCount:timeout:filling:)`): made ready and filled once,
/// before the first attempt (`ZMQSocket.prepareFilledMessage`), and sent as they are at
/// each attempt, a frame not queued kept for the next. Its owner releases them after the
/// send, whatever became of it (`release()`).
struct FilledMessage: OutgoingMessage {
    /// The message frame, then the data component's own frame if it travels alone.
    let frames: UnsafeMutablePointer<ZMQSocket.FrameSlot>
    let messageFrameSize: Int
    /// The size of the data component's own frame; 0 when it is in the message frame.
    let dataFrameSize: Int

    /// Written as a `.message` with correlation id 0 when made ready: the only send it serves.
    func send(on socket: ZMQSocket, as kind: WireKind, correlationID: UInt64, dontWait: Bool) throws(SystemCallError) -> Bool {
        assert(kind == .message && correlationID == 0, "a filled message is made ready as a plain message")
        let alone = dataFrameSize > 0
        guard try socket.sendFrameKeeping(frames, byteCount: messageFrameSize, more: alone, dontWait: dontWait) else {
            return false // nothing was queued
        }
        if alone { _ = try socket.sendFrameKeeping(frames + 1, byteCount: dataFrameSize, more: false, dontWait: false) }
        return true
    }

    /// Checked before its frames were made.
    func checkSize() throws(PortError) -> Bool { false }

    /// Releases its frames, sent or not.
    func release() {
        ZMQSocket.releaseFrame(frames, byteCount: messageFrameSize)
        if dataFrameSize > 0 { ZMQSocket.releaseFrame(frames + 1, byteCount: dataFrameSize) }
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
