/// Encodes and decodes RunLoopKit wire messages (format version 2) to and from the
/// frames of a ZeroMQ multipart message. The format is specified in `docs/wire-format.md`.
///
/// Frame 0 is the header, frame 1 the reply address (empty for none), frames 2... the
/// components. The header:
///
/// | bytes    | field                                            |
/// |----------|--------------------------------------------------|
/// | 0..<3    | magic, ASCII "RLK"                               |
/// | 3        | version, 2                                       |
/// | 4        | kind: 0 message, 1 request, 2 reply, 3 failure   |
/// | 5        | flags, 0                                         |
/// | 6..<8    | component count N, UInt16 little-endian          |
/// | 8..<12   | message id, Int32 little-endian                  |
/// | 12..<20  | correlation id, UInt64 little-endian             |
/// | 20..<20+N| one kind byte per component: 0 data, 1 port      |
///
/// The decoder checks syntax only (what each field may hold, not what a kind of message
/// must carry) and never traps on any input: every index it reads was checked first.
package enum WireCodec {
    /// The header's first three bytes, ASCII "RLK".
    @usableFromInline package static let magic: (UInt8, UInt8, UInt8) = (0x52, 0x4C, 0x4B)
    /// The format version this codec writes and the only one it reads.
    @usableFromInline package static let version: UInt8 = 2
    /// The size of the header before the component kinds.
    @usableFromInline package static let fixedHeaderSize = 20
    /// The transports a port address may name.
    package static let addressSchemes: [[UInt8]] = [Array("inproc://".utf8), Array("ipc://".utf8), Array("tcp://".utf8)]

    // MARK: - Encoding

    /// The frames of `message`, as `ZMQSocket.send(_:dontWait:)` of a `PortEnvelope` sends them.
    ///
    /// A `nil` or empty reply address is sent as an empty frame. The message must have at
    /// most 65535 components, the most a header can count (a precondition); addresses are
    /// not checked here, so that a sender's mistake shows up as the receiver's error.
    package static func encode(_ message: WireMessage) -> [[UInt8]] {
        let count = message.components.count
        let header = [UInt8](unsafeUninitializedCapacity: headerSize(componentCount: count)) { buffer, size in
            writeHeader(kind: message.kind, messageID: message.messageID, correlationID: message.correlationID,
                        componentCount: count, componentKind: { index in
                            if case .port = message.components[index] { portKind } else { dataKind }
                        },
                        into: UnsafeMutableRawBufferPointer(buffer))
            size = buffer.count
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

    /// The size of the header of a message with `componentCount` components; at most
    /// 65535 components (a precondition).
    package static func headerSize(componentCount: Int) -> Int {
        precondition(componentCount <= Int(UInt16.max), "a wire message has at most 65535 components, not \(componentCount)")
        return fixedHeaderSize + componentCount
    }

    /// Writes a header into `buffer`, which holds exactly `headerSize(componentCount:)`
    /// bytes, with `componentKind(i)` (`dataKind` or `portKind`) for each component `i`.
    /// Not generic, so that a sender in another module calls it without generic metadata.
    package static func writeHeader(kind: WireKind, messageID: Int32, correlationID: UInt64, componentCount: Int,
                                    componentKind: (Int) -> UInt8, into buffer: UnsafeMutableRawBufferPointer) {
        precondition(buffer.count == headerSize(componentCount: componentCount))
        buffer[0] = magic.0
        buffer[1] = magic.1
        buffer[2] = magic.2
        buffer[3] = version
        buffer[4] = kind.rawValue
        buffer[5] = 0 // flags
        buffer.storeBytes(of: UInt16(componentCount).littleEndian, toByteOffset: 6, as: UInt16.self)
        buffer.storeBytes(of: UInt32(bitPattern: messageID).littleEndian, toByteOffset: 8, as: UInt32.self)
        buffer.storeBytes(of: correlationID.littleEndian, toByteOffset: 12, as: UInt64.self)
        for index in 0..<componentCount {
            buffer[fixedHeaderSize + index] = componentKind(index)
        }
    }

    /// The component kind byte of a data component.
    @usableFromInline package static let dataKind: UInt8 = 0
    /// The component kind byte of a port component.
    @usableFromInline package static let portKind: UInt8 = 1

    // MARK: - Addresses

    /// Whether `address` is a valid port address: at most `maxBytes` bytes of UTF-8, no
    /// control characters (a NUL would cut the C string libzmq sees), and `inproc://`,
    /// `ipc://` or `tcp://` followed by at least one more character.
    package static func isValidAddress(_ address: String, maxBytes: Int = WireLimits.default.maxAddressBytes) -> Bool {
        Array(address.utf8).withUnsafeBytes { validatedAddress($0, maxBytes: maxBytes) != nil }
    }

    /// The address in `bytes` if it is valid (see `isValidAddress`), else `nil`.
    package static func validatedAddress(_ bytes: UnsafeRawBufferPointer, maxBytes: Int) -> String? {
        guard isValidAddress(bytes, maxBytes: maxBytes) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether `bytes` hold a valid address (see `isValidAddress`), checked where they
    /// are: no string is made.
    package static func isValidAddress(_ bytes: UnsafeRawBufferPointer, maxBytes: Int) -> Bool {
        guard !bytes.isEmpty, bytes.count <= maxBytes else { return false }
        guard addressSchemes.contains(where: { bytes.count > $0.count && bytes.starts(with: $0) }) else {
            return false
        }
        guard !bytes.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { return false }
        var decoder = Unicode.UTF8()
        var iterator = bytes.makeIterator()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }
}
