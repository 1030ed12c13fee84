/// Decoding: the receiving path reads the frames where libzmq put them
/// (`ZMQSocket.receive(dontWait:maxFrames:_:)`) and copies only each data component, once,
/// into the `LoopMessage` it delivers.
extension WireCodec {
    /// The message in `frames`, checked against the format and `limits`: the codec's model
    /// of what `decode(frames:limits:replyAddresses:)` reads from a socket.
    package static func decode(_ frames: [[UInt8]], limits: WireLimits = .default) throws(WireFormatError) -> WireMessage {
        // Laid out in one buffer, the frames can all be lent at once, as a socket lends them.
        let bytes = frames.flatMap { $0 }
        let decoded = bytes.withUnsafeBytes { all -> Result<PortEnvelope, WireFormatError> in
            var offset = 0
            let views = frames.map { frame in
                defer { offset += frame.count }
                return UnsafeRawBufferPointer(rebasing: all[offset..<offset + frame.count])
            }
            var replyAddresses = ReplyAddressCache()
            return views.withUnsafeBufferPointer { views in
                Result { () throws(WireFormatError) in
                    try decode(frames: views, limits: limits, replyAddresses: &replyAddresses)
                }
            }
        }
        return try decoded.get().wireMessage
    }

    /// The message in `frames`, checked against the format and `limits`.
    ///
    /// Checks run in this order, so each error names the first problem: frame count zero,
    /// header length (4 bytes), magic, version, header length (20 bytes), kind, flags,
    /// component count against `limits`, header length against the count, component
    /// kinds, frame count, frame sizes, then addresses in frame order. Never traps on any
    /// input: every index it reads was checked first.
    ///
    /// - Parameter replyAddresses: the receiving port's last validated reply address,
    ///   reused when the frame holds the same bytes.
    static func decode(frames: UnsafeBufferPointer<UnsafeRawBufferPointer>, limits: WireLimits,
                       replyAddresses: inout ReplyAddressCache) throws(WireFormatError) -> PortEnvelope {
        guard let header = frames.first else { throw .noFrames }

        // Magic and version first, so that a future version with another header layout
        // is reported as unsupported rather than malformed.
        guard header.count >= 4 else { throw .headerTooShort(header.count) }
        guard header[0] == magic.0, header[1] == magic.1, header[2] == magic.2 else { throw .badMagic }
        guard header[3] == version else { throw .unsupportedVersion(header[3]) }
        guard header.count >= fixedHeaderSize else { throw .headerTooShort(header.count) }

        // From here on, bytes 0..<20 exist.
        guard let kind = WireKind(rawValue: header[4]) else { throw .unknownKind(header[4]) }
        guard header[5] == 0 else { throw .reservedFlags(header[5]) }
        let componentCount = Int(UInt16(littleEndian: header.loadUnaligned(fromByteOffset: 6, as: UInt16.self)))
        guard componentCount <= limits.maxComponents else { throw .tooManyComponents(componentCount) }
        let messageID = Int32(bitPattern: UInt32(littleEndian: header.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
        let correlationID = UInt64(littleEndian: header.loadUnaligned(fromByteOffset: 12, as: UInt64.self))

        let headerSize = fixedHeaderSize + componentCount
        guard header.count == headerSize else {
            throw .headerLengthMismatch(expected: headerSize, actual: header.count)
        }
        // From here on, bytes 20..<20+componentCount exist.
        for index in 0..<componentCount {
            let componentKind = header[fixedHeaderSize + index]
            guard componentKind == dataKind || componentKind == portKind else {
                throw .unknownComponentKind(index: index, kind: componentKind)
            }
        }

        guard frames.count == 2 + componentCount else {
            throw .frameCountMismatch(expected: 2 + componentCount, actual: frames.count)
        }
        // From here on, frames 0..<2+componentCount exist. The header's size is already
        // bounded by the component limit, so only the frames after it are checked.
        for index in 1..<frames.count where frames[index].count > limits.maxFrameBytes {
            throw .frameTooLarge(index: index, size: frames[index].count)
        }

        var replyPort: RemotePort?
        if !frames[1].isEmpty {
            guard let port = replyAddresses.port(at: frames[1], maxBytes: limits.maxAddressBytes) else {
                throw .addressInvalid(index: 1)
            }
            replyPort = port
        }

        var components: [LoopMessage.Component] = []
        components.reserveCapacity(componentCount)
        for index in 0..<componentCount {
            let frame = frames[2 + index]
            if header[fixedHeaderSize + index] == dataKind {
                components.append(.data([UInt8](frame)))
            } else {
                guard let address = validatedAddress(frame, maxBytes: limits.maxAddressBytes) else {
                    throw .addressInvalid(index: 2 + index)
                }
                components.append(.port(RemotePort(PortAddress(unchecked: address))))
            }
        }
        let message = LoopMessage(id: messageID, components: components, replyPort: replyPort)
        return PortEnvelope(kind, message, correlationID: correlationID)
    }
}
