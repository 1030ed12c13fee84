import RunLoopSystem
import RunLoopWire
import RunLoopZMQ

/// Sending a port message as a wire message (`docs/wire-format.md`), each frame straight
/// from where its bytes already are: the header from a stack buffer, the reply address
/// and port components from their strings' UTF-8, the data components from their arrays.
/// The frames are those of `WireCodec.encode` (a test compares them).
extension ZMQSocket {
    /// Sends `message` as one multipart wire message of `kind` (with `correlationID` for
    /// request/reply), as `send(_:dontWait:)` sends frames: only the first frame uses
    /// `dontWait`, and once it is accepted the rest is too. The message is borrowed, never
    /// copied into an envelope: a copy costs a retain and a release of each of its
    /// references per message.
    ///
    /// - Parameter returnPath: for a reply sent on a port's ROUTER socket, the connection
    ///   its request came in on: its routing id (and delimiter) go first.
    /// - Returns: whether the message was queued; always `true` when not `dontWait`.
    /// - Throws: `hostUnreachable` for a `returnPath` whose connection is gone (the ROUTER
    ///   socket is `routerMandatory`), and any other failure of `zmq_send`.
    func send(_ message: LoopMessage, as kind: WireKind, correlationID: UInt64 = 0, dontWait: Bool,
              via returnPath: ReturnPath? = nil) throws(SystemCallError) -> Bool {
        if let returnPath {
            let accepted = returnPath.routingID.withUnsafeBytes { routingID in
                Result { () throws(SystemCallError) in try sendFrame(routingID, more: true, dontWait: dontWait) }
            }
            guard try accepted.get() else { return false } // nothing was queued
            if returnPath.hasDelimiter { try sendFrame([], more: true) }
            return try send(message, as: kind, correlationID: correlationID, dontWait: false)
        }
        // The message is only read, field by field, and the closures below capture only
        // what they need: capturing the message costs a retain and a release of each of
        // its references per message.
        let components = message.components
        let messageID = message.id
        let headerSize = WireCodec.headerSize(componentCount: components.count)
        let headerAccepted = withUnsafeTemporaryAllocation(byteCount: headerSize, alignment: 1) { header in
            WireCodec.writeHeader(
                kind: kind, messageID: messageID, correlationID: correlationID,
                componentCount: components.count,
                componentKind: { if case .port = components[$0] { WireCodec.portKind } else { WireCodec.dataKind } },
                into: header)
            return Result { () throws(SystemCallError) in try sendFrame(UnsafeRawBufferPointer(header), more: true, dontWait: dontWait) }
        }
        guard try headerAccepted.get() else { return false } // nothing was queued
        if let replyPort = message.replyPort {
            try sendFrame(utf8Of: replyPort.address.rawValue, more: !components.isEmpty)
        } else {
            try sendFrame([], more: !components.isEmpty) // no reply port: an empty frame, made from no string
        }
        for index in components.indices {
            let more = index != components.count - 1
            switch components[index] {
            case .data(let bytes): try sendFrame(bytes, more: more)
            case .port(let port): try sendFrame(utf8Of: port.address.rawValue, more: more)
            }
        }
        return true
    }

    /// Sends a message of one data component, `data`, with no reply port, as
    /// `send(_:as:correlationID:dontWait:via:)` sends a `LoopMessage` that holds it: the
    /// same frames, with no message built for them.
    func send(id messageID: Int32, data: UnsafeRawBufferPointer, as kind: WireKind, correlationID: UInt64 = 0,
              dontWait: Bool) throws(SystemCallError) -> Bool {
        let headerSize = WireCodec.headerSize(componentCount: 1)
        let headerAccepted = withUnsafeTemporaryAllocation(byteCount: headerSize, alignment: 1) { header in
            WireCodec.writeHeader(kind: kind, messageID: messageID, correlationID: correlationID, componentCount: 1,
                                  componentKind: { _ in WireCodec.dataKind }, into: header)
            return Result { () throws(SystemCallError) in try sendFrame(UnsafeRawBufferPointer(header), more: true, dontWait: dontWait) }
        }
        guard try headerAccepted.get() else { return false } // nothing was queued
        try sendFrame([], more: true) // no reply port
        _ = try sendFrame(data, more: false, dontWait: false)
        return true
    }

    /// Sends a frame after the first, which libzmq never makes wait (see `send(_:dontWait:)`).
    private func sendFrame(_ bytes: [UInt8], more: Bool) throws(SystemCallError) {
        let sent = bytes.withUnsafeBytes { buffer in
            Result { () throws(SystemCallError) in try sendFrame(buffer, more: more, dontWait: false) }
        }
        _ = try sent.get()
    }

    private func sendFrame(utf8Of string: String, more: Bool) throws(SystemCallError) {
        var string = string
        let sent = string.withUTF8 { buffer in
            Result { () throws(SystemCallError) in try sendFrame(UnsafeRawBufferPointer(buffer), more: more, dontWait: false) }
        }
        _ = try sent.get()
    }
}
