/// Encodes and decodes RunLoopKit wire messages (format version 1) to and from the
/// frames of a ZeroMQ multipart message. The format is specified in `docs/wire-format.md`.
///
/// Frame 0 is the header, frame 1 the reply address (empty for none), frames 2... the
/// components. The header:
///
/// | bytes    | field                                            |
/// |----------|--------------------------------------------------|
/// | 0..<3    | magic, ASCII "RLK"                               |
/// | 3        | version, 1                                       |
/// | 4        | kind: 0 message, 1 request, 2 reply              |
/// | 5        | flags, 0                                         |
/// | 6..<8    | component count N, UInt16 little-endian          |
/// | 8..<12   | message id, Int32 little-endian                  |
/// | 12..<20  | correlation id, UInt64 little-endian             |
/// | 20..<20+N| one kind byte per component: 0 data, 1 port      |
///
/// The decoder checks syntax only (what each field may hold, not what a kind of message
/// must carry) and never traps on any input: every index it reads was checked first.
enum WireCodec {
    /// The header's first three bytes, ASCII "RLK".
    static let magic: (UInt8, UInt8, UInt8) = (0x52, 0x4C, 0x4B)
    /// The format version this codec writes and the only one it reads.
    static let version: UInt8 = 1
    /// The size of the header before the component kinds.
    static let fixedHeaderSize = 20
    /// The transports a port address may name.
    static let addressSchemes: [[UInt8]] = [Array("inproc://".utf8), Array("ipc://".utf8), Array("tcp://".utf8)]

    private static let dataKind: UInt8 = 0
    private static let portKind: UInt8 = 1

    // MARK: - Encoding

    /// The frames of `message`.
    ///
    /// A `nil` or empty reply address is sent as an empty frame. The message must have at
    /// most 65535 components, the most a header can count (a precondition); addresses are
    /// not checked here, so that a sender's mistake shows up as the receiver's error.
    static func encode(_ message: WireMessage) -> [[UInt8]] {
        let count = message.components.count
        precondition(count <= Int(UInt16.max), "a wire message has at most 65535 components, not \(count)")

        var header: [UInt8] = []
        header.reserveCapacity(fixedHeaderSize + count)
        header.append(magic.0)
        header.append(magic.1)
        header.append(magic.2)
        header.append(version)
        header.append(message.kind.rawValue)
        header.append(0) // flags
        appendLittleEndian(UInt16(count), to: &header)
        appendLittleEndian(message.messageID, to: &header)
        appendLittleEndian(message.correlationID, to: &header)
        for component in message.components {
            switch component {
            case .data: header.append(dataKind)
            case .port: header.append(portKind)
            }
        }

        var frames: [[UInt8]] = []
        frames.reserveCapacity(2 + count)
        frames.append(header)
        frames.append(Array((message.replyAddress ?? "").utf8))
        for component in message.components {
            switch component {
            case .data(let bytes): frames.append(bytes)
            case .port(let address): frames.append(Array(address.utf8))
            }
        }
        return frames
    }

    private static func appendLittleEndian<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        for byte in 0..<(T.bitWidth / 8) {
            bytes.append(UInt8(truncatingIfNeeded: value >> (byte * 8)))
        }
    }

    // MARK: - Decoding

    /// The message in `frames`, checked against the format and `limits`.
    ///
    /// Checks run in this order, so each error names the first problem: frame count zero,
    /// header length (4 bytes), magic, version, header length (20 bytes), kind, flags,
    /// component count against `limits`, header length against the count, component
    /// kinds, frame count, frame sizes, then addresses in frame order.
    static func decode(_ frames: [[UInt8]], limits: WireLimits = .default) throws(WireFormatError) -> WireMessage {
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
        let componentCount = Int(UInt16(header[6]) | UInt16(header[7]) << 8)
        guard componentCount <= limits.maxComponents else { throw .tooManyComponents(componentCount) }
        let messageID = Int32(bitPattern: UInt32(littleEndianBytesOf: header, at: 8))
        let correlationID = UInt64(littleEndianBytesOf: header, at: 12)

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

        var replyAddress: String?
        if !frames[1].isEmpty {
            guard let address = validatedAddress(frames[1], maxBytes: limits.maxAddressBytes) else {
                throw .addressInvalid(index: 1)
            }
            replyAddress = address
        }

        var components: [WireComponent] = []
        components.reserveCapacity(componentCount)
        for index in 0..<componentCount {
            let frame = frames[2 + index]
            if header[fixedHeaderSize + index] == dataKind {
                components.append(.data(frame))
            } else {
                guard let address = validatedAddress(frame, maxBytes: limits.maxAddressBytes) else {
                    throw .addressInvalid(index: 2 + index)
                }
                components.append(.port(address: address))
            }
        }

        return WireMessage(
            kind: kind,
            messageID: messageID,
            correlationID: correlationID,
            replyAddress: replyAddress,
            components: components
        )
    }

    // MARK: - Addresses

    /// Whether `address` is a valid port address: at most `maxBytes` bytes of UTF-8, no
    /// control characters (a NUL would cut the C string libzmq sees), and `inproc://`,
    /// `ipc://` or `tcp://` followed by at least one more character.
    static func isValidAddress(_ address: String, maxBytes: Int = WireLimits.default.maxAddressBytes) -> Bool {
        validatedAddress(Array(address.utf8), maxBytes: maxBytes) != nil
    }

    /// The address in `bytes` if it is valid (see `isValidAddress`), else `nil`.
    static func validatedAddress(_ bytes: [UInt8], maxBytes: Int) -> String? {
        guard !bytes.isEmpty, bytes.count <= maxBytes else { return nil }
        guard addressSchemes.contains(where: { bytes.count > $0.count && bytes.starts(with: $0) }) else {
            return nil
        }
        guard !bytes.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { return nil }
        return String(validating: bytes, as: UTF8.self)
    }
}

extension FixedWidthInteger where Self: UnsignedInteger {
    /// Assembles an integer from `bytes[offset..<offset + size]`, least significant byte
    /// first. The caller has checked that those bytes exist.
    @inline(__always)
    fileprivate init(littleEndianBytesOf bytes: [UInt8], at offset: Int) {
        var value: Self = 0
        for byte in 0..<(Self.bitWidth / 8) {
            value |= Self(bytes[offset + byte]) << (byte * 8)
        }
        self = value
    }
}
