import RunLoopSystem
import RunLoopWire
import RunLoopZMQ

/// Sending a port message as a wire message (`docs/wire-format.md`): the message frame
/// written once, in place, into the buffer libzmq sends (`prepareFrame(_:byteCount:)`), from
/// where the bytes already are (the addresses' UTF-8, the data components' arrays); a large
/// data component as a frame of its own. The frames are those of `WireCodec.encode` (a
/// test compares them).
extension ZMQSocket {
    /// Sends `message` as one multipart wire message of `kind` (with `correlationID` for
    /// request/reply), as `send(_:dontWait:)` sends frames: only the first frame uses
    /// `dontWait`, and once it is accepted the rest is too. The message is borrowed, never
    /// copied into an envelope (hot-path: borrow-not-copy (docs/optimization-tips.md)).
    ///
    /// - Parameters:
    ///   - returnPath: for a reply sent on a port's ROUTER socket, the connection its
    ///     request came in on: its routing id (and delimiter) go first.
    ///   - descriptorToken: the token the message's descriptors were sent under on the
    ///     destination's side channel; nil sends descriptor components under the all-zero
    ///     token, which names none (the receiver drops the message, `unknownDescriptors`).
    /// - Returns: whether the message was queued; always `true` when not `dontWait`.
    /// - Throws: `hostUnreachable` for a `returnPath` whose connection is gone (the ROUTER
    ///   socket is `routerMandatory`), and any other failure of `zmq_send`.
    func send(_ message: LoopMessage, as kind: WireKind, correlationID: UInt64 = 0, dontWait: Bool,
              via returnPath: ReturnPath? = nil, descriptorToken: DescriptorToken? = nil) throws(SystemCallError) -> Bool {
        if let returnPath {
            let accepted = try returnPath.routingID.withUnsafeBytes { routingID throws(SystemCallError) in
                try sendFrame(routingID, more: true, dontWait: dontWait)
            }
            guard accepted else { return false } // nothing was queued
            if returnPath.hasDelimiter { try sendFrame([], more: true) }
            return try send(message, as: kind, correlationID: correlationID, dontWait: false)
        }
        // The common message, one data component and no reply port, goes as the bytes it
        // holds: no layout pass, one copy of the component. hot-path: borrow-not-copy (docs/optimization-tips.md)
        if message.replyPort == nil, message.components.count == 1, case .data(let bytes) = message.components[0] {
            let id = message.id
            return try bytes.withUnsafeBufferPointer { data throws(SystemCallError) in
                try send(id: id, .data(UnsafeRawBufferPointer(data)), as: kind, correlationID: correlationID,
                         dontWait: dontWait)
            }
        }
        return try send(id: message.id, .components(message.components, replyPort: message.replyPort,
                                                    descriptorToken: descriptorToken),
                        as: kind, correlationID: correlationID, dontWait: dontWait)
    }

    /// Sends a message of one data component, `data`, with no reply port, as
    /// `send(_:as:correlationID:dontWait:via:)` sends a `LoopMessage` that holds it: the
    /// same frames, with no message built for them.
    func send(id messageID: Int32, data: UnsafeRawBufferPointer, as kind: WireKind, correlationID: UInt64 = 0,
              dontWait: Bool) throws(SystemCallError) -> Bool {
        try send(id: messageID, .data(data), as: kind, correlationID: correlationID, dontWait: dontWait)
    }

    /// Makes ready in `frames` (room for two) the frames of a `.message` of id `messageID`
    /// with one data component of `byteCount` bytes and no reply port — the frames
    /// `send(id:data:as:correlationID:dontWait:)` would send for such bytes — with the
    /// header written and the component's bytes left for the caller to write in place, at
    /// the address returned: in the message frame below `WireCodec.ownFrameThreshold`, else
    /// the whole of a frame of their own (`prepareFrame(_:byteCount:)`: libzmq's allocation
    /// or the frame pool's buffer, never copied again). The caller writes exactly
    /// `byteCount` bytes there, then sends and releases the frames (`FilledMessage`).
    func prepareFilledMessage(_ frames: UnsafeMutablePointer<FrameSlot>, id messageID: Int32,
                              byteCount: Int) throws(SystemCallError) -> (message: FilledMessage, bytes: UnsafeMutableRawBufferPointer) {
        var layout = WireCodec.Layout(componentCount: 1, replyPortBytes: 0)
        layout.addData(byteCount)
        layout.finish()
        let alone = layout.ownFrameCount > 0
        let data = alone ? try prepareFrame(frames + 1, byteCount: byteCount) : UnsafeMutableRawBufferPointer(start: nil, count: 0)
        let frame: UnsafeMutableRawBufferPointer
        do throws(SystemCallError) {
            frame = try prepareFrame(frames, byteCount: layout.messageFrameSize)
        } catch {
            if alone { Self.releaseFrame(frames + 1, byteCount: byteCount) }
            throw error
        }
        var writer = WireCodec.MessageFrameWriter(frame, layout: layout, kind: .message, messageID: messageID,
                                                  correlationID: 0)
        let inline = writer.reserveDataComponent(0, byteCount: byteCount)
        writer.finish()
        let message = FilledMessage(frames: frames, messageFrameSize: layout.messageFrameSize,
                                    dataFrameSize: alone ? byteCount : 0)
        return (message, alone ? data : inline)
    }

    /// Sends a message of one shared data component, whose note (`SharedNote`, 32 bytes)
    /// names where its bytes lie in a ring the destination port maps, and no reply port.
    func send(id messageID: Int32, sharedNote note: UnsafeRawBufferPointer, as kind: WireKind, correlationID: UInt64,
              dontWait: Bool) throws(SystemCallError) -> Bool {
        try send(id: messageID, .sharedNote(note), as: kind, correlationID: correlationID, dontWait: dontWait)
    }

    /// Sends a message of `kind` with no components and no reply port — its 22-byte
    /// header alone, in one frame (a cancel, `docs/wire-format.md` step 7).
    func sendHeaderOnly(kind: WireKind, messageID: Int32, correlationID: UInt64, dontWait: Bool) throws(SystemCallError) -> Bool {
        try send(id: messageID, .headerOnly, as: kind, correlationID: correlationID, dontWait: dontWait)
    }

    /// What a wire message carries after its header.
    private enum Body {
        case headerOnly
        /// One data component, borrowed, and no reply port.
        case data(UnsafeRawBufferPointer)
        /// One shared data component's note, and no reply port.
        case sharedNote(UnsafeRawBufferPointer)
        case components([LoopMessage.Component], replyPort: RemotePort?, descriptorToken: DescriptorToken?)
    }

    /// The one send path: the message frame written in place (`prepareFrame(_:byteCount:)`),
    /// then the data components that travel alone. `body` is borrowed, not copied (a copy
    /// retains and releases its array and port). hot-path: borrow-not-copy (docs/optimization-tips.md)
    private func send(id messageID: Int32, _ body: borrowing Body, as kind: WireKind, correlationID: UInt64,
                      dontWait: Bool) throws(SystemCallError) -> Bool {
        var layout: WireCodec.Layout
        switch body {
        case .headerOnly:
            layout = WireCodec.Layout(componentCount: 0, replyPortBytes: 0)
        case .data(let data):
            layout = WireCodec.Layout(componentCount: 1, replyPortBytes: 0)
            layout.addData(data.count)
        case .sharedNote:
            layout = WireCodec.Layout(componentCount: 1, replyPortBytes: 0)
            layout.addSharedData()
        case .components(let components, let replyPort, _):
            layout = WireCodec.Layout(componentCount: components.count,
                                      replyPortBytes: replyPort?.address.rawValue.utf8.count ?? 0)
            for component in components {
                switch component {
                case .data(let bytes): layout.addData(bytes.count)
                case .port(let port): layout.addPort(port.address.rawValue.utf8.count)
                case .descriptor: layout.addDescriptor()
                }
            }
        }
        layout.finish()
        let accepted = try withUnsafeTemporaryAllocation(of: FrameSlot.self, capacity: 1) {
            slot throws(SystemCallError) in
            let slot = slot.baseAddress.unsafelyUnwrapped
            let frame = try prepareFrame(slot, byteCount: layout.messageFrameSize)
            var writer = WireCodec.MessageFrameWriter(frame, layout: layout, kind: kind, messageID: messageID,
                                                      correlationID: correlationID)
            switch body {
            case .headerOnly:
                break
            case .data(let data):
                writer.writeComponent(0, isPort: false, data)
            case .sharedNote(let note):
                writer.writeSharedDataComponent(0, note)
            case .components(let components, let replyPort, let descriptorToken):
                writer = Self.write(components, replyPort: replyPort, descriptorToken: descriptorToken,
                                    after: writer)
            }
            writer.finish()
            return try sendFrame(slot, byteCount: layout.messageFrameSize, more: layout.ownFrameCount > 0,
                                 dontWait: dontWait)
        }
        guard accepted else { return false } // nothing was queued
        var alone = layout.ownFrameCount
        switch body {
        case .headerOnly, .sharedNote:
            break
        case .data(let data):
            if alone > 0 { _ = try sendFrame(data, more: false, dontWait: false) }
        case .components(let components, _, _):
            for component in components where alone > 0 {
                if case .data(let bytes) = component, layout.dataTravelsAlone(size: bytes.count) {
                    alone -= 1
                    try sendFrame(bytes, more: alone > 0)
                }
            }
        }
        return true
    }

    /// Writes a message's reply port and components into its message frame after its
    /// header, for `send(id:_:…)`, which the one-component message runs too.
    private static func write(_ components: [LoopMessage.Component], replyPort: RemotePort?,
                              descriptorToken: DescriptorToken?, after header: WireCodec.MessageFrameWriter) -> WireCodec.MessageFrameWriter {
        var writer = header
        if var replyAddress = replyPort?.address.rawValue {
            replyAddress.withUTF8 { writer.writeReplyPort(UnsafeRawBufferPointer($0)) }
        }
        for index in components.indices {
            switch components[index] {
            case .data(let bytes):
                bytes.withUnsafeBytes { writer.writeComponent(index, isPort: false, $0) }
            case .port(let port):
                var address = port.address.rawValue
                address.withUTF8 { writer.writeComponent(index, isPort: true, UnsafeRawBufferPointer($0)) }
            case .descriptor:
                // The descriptor's claim: the token and its ordinal among the message's descriptors.
                var ordinal: UInt32 = 0
                for case .descriptor in components[..<index] { ordinal += 1 }
                let token = (descriptorToken ?? DescriptorToken(high: 0, low: 0)).bytes
                (token + withUnsafeBytes(of: ordinal.littleEndian, Array.init)).withUnsafeBytes {
                    writer.writeDescriptorComponent(index, $0)
                }
            }
        }
        return writer
    }

    /// Sends a frame after the first, which libzmq never makes wait (see `send(_:dontWait:)`).
    private func sendFrame(_ bytes: [UInt8], more: Bool) throws(SystemCallError) {
        _ = try bytes.withUnsafeBufferPointer { buffer throws(SystemCallError) in
            try sendFrame(UnsafeRawBufferPointer(buffer), more: more, dontWait: false)
        }
    }

}
