/// Decoding, as bytes: the checks every received message passes, and the codec's model
/// of a decoded message (`WireMessage`). The ports' receiving path
/// (`PortEnvelope.decode(frames:limits:replyAddresses:)`) runs the same checks on the
/// frames where libzmq put them and builds its message from them directly.
extension WireCodec {
    /// The header of a message whose frames passed every check but the addresses' (which
    /// the caller makes, in frame order, as it builds its components). Valid only while
    /// the frames it was read from are.
    package struct CheckedHeader {
        package let kind: WireKind
        package let messageID: Int32
        package let correlationID: UInt64
        package let componentCount: Int
        /// The header's bytes, for the component kinds.
        @usableFromInline let bytes: UnsafeRawBufferPointer

        /// Whether component `index` (0-based, below `componentCount`) is a port.
        @inlinable package func isPort(_ index: Int) -> Bool {
            bytes[WireCodec.fixedHeaderSize + index] == WireCodec.portKind
        }

        @usableFromInline init(kind: WireKind, messageID: Int32, correlationID: UInt64, componentCount: Int,
                         bytes: UnsafeRawBufferPointer) {
            self.kind = kind
            self.messageID = messageID
            self.correlationID = correlationID
            self.componentCount = componentCount
            self.bytes = bytes
        }
    }

    /// The message in `frames`, checked against the format and `limits`: the codec's model
    /// of what a port reads from a socket.
    package static func decode(_ frames: [[UInt8]], limits: WireLimits = .default) throws(WireFormatError) -> WireMessage {
        try withFramesLent(frames) { (frames) throws(WireFormatError) in
            let header = try checkedHeader(frames, limits: limits)
            var replyAddress: String?
            if !frames[1].isEmpty {
                guard let address = validatedAddress(frames[1], maxBytes: limits.maxAddressBytes) else {
                    throw .addressInvalid(index: 1)
                }
                replyAddress = address
            }
            var components: [WireComponent] = []
            for index in 0..<header.componentCount {
                let frame = frames[2 + index]
                if header.isPort(index) {
                    guard let address = validatedAddress(frame, maxBytes: limits.maxAddressBytes) else {
                        throw .addressInvalid(index: 2 + index)
                    }
                    components.append(.port(address: address))
                } else {
                    components.append(.data([UInt8](frame)))
                }
            }
            return WireMessage(kind: header.kind, messageID: header.messageID,
                               correlationID: header.correlationID, replyAddress: replyAddress,
                               components: components)
        }
    }

    /// Lays `frames` out in one buffer and lends them to `body` all at once, as a socket
    /// lends the frames it received: for the codec's model and the ports' decoder probe.
    package static func withFramesLent<Value>(
        _ frames: [[UInt8]],
        _ body: (UnsafeBufferPointer<UnsafeRawBufferPointer>) throws(WireFormatError) -> Value
    ) throws(WireFormatError) -> Value {
        let bytes = frames.flatMap { $0 }
        let result = bytes.withUnsafeBytes { all -> Result<Value, WireFormatError> in
            var offset = 0
            let views = frames.map { frame in
                defer { offset += frame.count }
                return UnsafeRawBufferPointer(rebasing: all[offset..<offset + frame.count])
            }
            return views.withUnsafeBufferPointer { lent in Result { () throws(WireFormatError) in try body(lent) } }
        }
        return try result.get()
    }

    /// Checks `frames` against the format and `limits`, all but the addresses.
    ///
    /// Checks run in this order, so each error names the first problem: frame count zero,
    /// header length (4 bytes), magic, version, header length (20 bytes), kind, flags,
    /// component count against `limits`, header length against the count, component
    /// kinds, frame count, frame sizes; then the caller checks addresses in frame order
    /// (`validatedAddress`): the reply address (frame 1, if not empty), then each port
    /// component. Never traps on any input: every index it reads was checked first.
    @inlinable package static func checkedHeader(_ frames: UnsafeBufferPointer<UnsafeRawBufferPointer>,
                                      limits: WireLimits) throws(WireFormatError) -> CheckedHeader {
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
        return CheckedHeader(kind: kind, messageID: messageID, correlationID: correlationID,
                             componentCount: componentCount, bytes: header)
    }
}
