/// Encodes and decodes RunLoopKit wire messages (format version 3) to and from the
/// frames of a ZeroMQ multipart message. The format is specified in `docs/wire-format.md`.
///
/// Frame 0, the *message frame*, holds the header, the component table, the reply port
/// and every component small enough to travel inline; a large data component travels in
/// a frame of its own (frames 1, 2, … in component order). The header:
///
/// | bytes    | field                                            |
/// |----------|--------------------------------------------------|
/// | 0..<3    | magic, ASCII "RLK"                               |
/// | 3        | version, 3                                       |
/// | 4        | kind: 0 message, 1 request, 2 reply, 3 failure, 4 cancel, 5 no reply, 6 statistics query |
/// | 5        | flags, 0                                         |
/// | 6..<8    | component count N, UInt16 little-endian          |
/// | 8..<12   | message id, Int32 little-endian                  |
/// | 12..<20  | correlation id, UInt64 little-endian             |
/// | 20..<22  | reply port length R, UInt16 little-endian (0: none) |
/// | 22..<22+5N | the component table: per component, its kind (0 data, 1 port, 2 data in a frame of its own, 3 descriptor, 4 data in shared memory) and its length, UInt32 little-endian |
///
/// then the reply port's R bytes, then the inline components' bytes, in order.
///
/// The decoder checks syntax only (what each field may hold, not what a kind of message
/// must carry) and never traps on any input: every index it reads was checked first.
@usableFromInline package enum WireCodec {
    /// The header's first three bytes, ASCII "RLK".
    @inlinable package static var magic: (UInt8, UInt8, UInt8) { (0x52, 0x4C, 0x4B) }
    /// The format version this codec writes and the only one it reads.
    @inlinable package static var version: UInt8 { 3 }
    /// The size of the header before the component table.
    @inlinable package static var fixedHeaderSize: Int { 22 }
    /// The size of one entry of the component table: a kind byte and a 32-bit length.
    @inlinable package static var tableEntrySize: Int { 5 }
    /// A data component of at least this many bytes travels in a frame of its own: copying
    /// it into the message frame would cost more than the frame.
    @inlinable package static var ownFrameThreshold: Int { 64 << 10 }
    /// The transports a port address may name.
    package static let addressSchemes: [[UInt8]] = [Array("inproc://".utf8), Array("ipc://".utf8), Array("tcp://".utf8)]

    /// The component kind byte of a data component carried in the message frame.
    @inlinable package static var dataKind: UInt8 { 0 }
    /// The component kind byte of a port component (its address, in the message frame).
    @inlinable package static var portKind: UInt8 { 1 }
    /// The component kind byte of a data component carried in a frame of its own.
    @inlinable package static var ownFrameDataKind: UInt8 { 2 }
    /// The component kind byte of a descriptor component: in the message frame, a 16-byte
    /// token and a 32-bit index into the descriptors sent under it (`docs/wire-format.md`).
    @inlinable package static var descriptorKind: UInt8 { 3 }
    /// The length of every descriptor component.
    @inlinable package static var descriptorComponentSize: Int { 20 }
    /// The component kind byte of a data component in shared memory: in the message frame,
    /// a note naming where its bytes lie in a ring the sender shared with the receiving
    /// port (`docs/wire-format.md`, "Shared memory"): a 16-byte token, then the bytes'
    /// start and length, 64-bit each.
    @inlinable package static var sharedDataKind: UInt8 { 4 }
    /// The length of every shared data component's note.
    @inlinable package static var sharedComponentSize: Int { 32 }

    /// The kind byte of a statistics query (format version 3, after RunLoopKit 0.1.0): a
    /// header alone (no components, no reply port) with a fresh nonzero correlation id,
    /// which the library of the port's process answers itself with a reply (kind 2) of one
    /// data component, the port's statistics as JSON (`docs/wire-format.md`). Not a
    /// `WireKind`: `checkedHeader` rejects it as `unknownKind(6)`, and only a port's
    /// receive path takes it back from there.
    @inlinable package static var statisticsQueryKind: UInt8 { 6 }

    /// The size of `writeSoleFrameHeader`'s message frame.
    package static var soleFrameHeaderSize: Int { fixedHeaderSize + tableEntrySize }

    /// Writes at the start of `buffer` (at least `soleFrameHeaderSize` bytes) the message
    /// frame of a plain message of id `id` whose one component is data in a frame of its
    /// own of `frameLength` bytes (no reply port), and returns it: what a queued shared
    /// note stands for (`docs/wire-format.md`, "Shared memory").
    package static func writeSoleFrameHeader(into buffer: UnsafeMutableRawBufferPointer, id: Int32,
                                             frameLength: Int) -> UnsafeRawBufferPointer {
        precondition(buffer.count >= soleFrameHeaderSize && frameLength <= Int(UInt32.max))
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        buffer[0] = magic.0
        buffer[1] = magic.1
        buffer[2] = magic.2
        buffer[3] = version
        buffer.storeBytes(of: UInt16(1).littleEndian, toByteOffset: 6, as: UInt16.self)
        buffer.storeBytes(of: UInt32(bitPattern: id).littleEndian, toByteOffset: 8, as: UInt32.self)
        buffer[fixedHeaderSize] = ownFrameDataKind
        buffer.storeBytes(of: UInt32(frameLength).littleEndian, toByteOffset: fixedHeaderSize + 1, as: UInt32.self)
        return UnsafeRawBufferPointer(rebasing: buffer[0..<soleFrameHeaderSize])
    }

    /// The one frame of a statistics query: the 22-byte header of kind 6.
    package static func statisticsQuery(messageID: Int32 = 0, correlationID: UInt64) -> [UInt8] {
        var frame = [UInt8](repeating: 0, count: fixedHeaderSize)
        frame.withUnsafeMutableBytes { frame in
            frame[0] = magic.0
            frame[1] = magic.1
            frame[2] = magic.2
            frame[3] = version
            frame[4] = statisticsQueryKind
            frame.storeBytes(of: UInt32(bitPattern: messageID).littleEndian, toByteOffset: 8, as: UInt32.self)
            frame.storeBytes(of: correlationID.littleEndian, toByteOffset: 12, as: UInt64.self)
        }
        return frame
    }

    /// The message id and correlation id of a well-formed statistics query in `frames`
    /// (the wire message's own, after any routing id): one frame of exactly the header,
    /// kind 6, no flags, no components, no reply port, a nonzero correlation id. Nil for
    /// anything else.
    package static func statisticsQueryIDs(_ frames: UnsafeBufferPointer<UnsafeRawBufferPointer>)
        -> (messageID: Int32, correlationID: UInt64)? {
        guard frames.count == 1, let frame = frames.first, frame.count == fixedHeaderSize,
              frame[0] == magic.0, frame[1] == magic.1, frame[2] == magic.2, frame[3] == version,
              frame[4] == statisticsQueryKind, frame[5] == 0,
              frame.loadUnaligned(fromByteOffset: 6, as: UInt16.self) == 0,
              frame.loadUnaligned(fromByteOffset: 20, as: UInt16.self) == 0
        else { return nil }
        let correlationID = UInt64(littleEndian: frame.loadUnaligned(fromByteOffset: 12, as: UInt64.self))
        guard correlationID != 0 else { return nil }
        let messageID = Int32(bitPattern: UInt32(littleEndian: frame.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
        return (messageID, correlationID)
    }

    // MARK: - Encoding

    /// The frames of `message`, as a port sends them (`ZMQSocket+PortMessages.swift`, which
    /// a test compares with this).
    ///
    /// A `nil` or empty reply address is sent as none. The message must have at most 65535
    /// components and a reply address of at most 65535 bytes, the most a header can count
    /// (preconditions); addresses are not checked here, so that a sender's mistake shows up
    /// as the receiver's error.
    package static func encode(_ message: WireMessage) -> [[UInt8]] {
        let replyAddress = Array((message.replyAddress ?? "").utf8)
        let bytes: [[UInt8]] = message.components.map { component in
            switch component {
            case .data(let bytes): bytes
            case .port(let address): Array(address.utf8)
            case .descriptor(let token, let index): token + withUnsafeBytes(of: index.littleEndian, Array.init)
            case .sharedData(let token, let start, let length):
                token + withUnsafeBytes(of: start.littleEndian, Array.init) + withUnsafeBytes(of: length.littleEndian, Array.init)
            }
        }
        var layout = Layout(componentCount: bytes.count, replyPortBytes: replyAddress.count)
        for index in bytes.indices {
            switch message.components[index] {
            case .data: layout.addData(bytes[index].count)
            case .port: layout.addPort(bytes[index].count)
            case .descriptor: layout.addDescriptor()
            case .sharedData: layout.addSharedData()
            }
        }
        layout.finish()
        var messageFrame = [UInt8](repeating: 0, count: layout.messageFrameSize)
        messageFrame.withUnsafeMutableBytes { frame in
            var writer = MessageFrameWriter(frame, layout: layout, kind: message.kind, messageID: message.messageID,
                                            correlationID: message.correlationID)
            replyAddress.withUnsafeBytes { writer.writeReplyPort($0) }
            for index in bytes.indices {
                switch message.components[index] {
                case .descriptor: bytes[index].withUnsafeBytes { writer.writeDescriptorComponent(index, $0) }
                case .sharedData: bytes[index].withUnsafeBytes { writer.writeSharedDataComponent(index, $0) }
                case .port: bytes[index].withUnsafeBytes { writer.writeComponent(index, isPort: true, $0) }
                case .data: bytes[index].withUnsafeBytes { writer.writeComponent(index, isPort: false, $0) }
                }
            }
            writer.finish()
        }
        var frames = [messageFrame]
        for (index, component) in message.components.enumerated() {
            if case .data(let data) = component, layout.dataTravelsAlone(size: data.count) { frames.append(bytes[index]) }
        }
        return frames
    }

    /// Where each part of a message goes: which data components travel in frames of their
    /// own, and the size of the message frame. A data component of `ownFrameThreshold`
    /// bytes or more travels alone; so does every data component when the message frame
    /// would otherwise be larger than `WireLimits.default.maxFrameBytes`, which no receiver
    /// takes. Made by adding each component's size in order (`addData`, `addPort`), then
    /// `finish()`; plain numbers, so a sender builds one on the stack.
    @usableFromInline package struct Layout {
        @usableFromInline package let componentCount: Int
        @usableFromInline package let replyPortBytes: Int
        /// The message frame's size in bytes (after `finish()`).
        @usableFromInline package internal(set) var messageFrameSize: Int
        /// How many data components travel in frames of their own (after `finish()`).
        @usableFromInline package internal(set) var ownFrameCount = 0
        @usableFromInline var allDataAlone = false
        @usableFromInline var inlineDataBytes = 0
        @usableFromInline var dataCount = 0

        @inlinable @inline(__always)
        package init(componentCount: Int, replyPortBytes: Int) {
            precondition(componentCount <= Int(UInt16.max), "a wire message has at most 65535 components, not \(componentCount)")
            precondition(replyPortBytes <= Int(UInt16.max), "a reply address has at most 65535 bytes")
            self.componentCount = componentCount
            self.replyPortBytes = replyPortBytes
            messageFrameSize = WireCodec.fixedHeaderSize + WireCodec.tableEntrySize * componentCount + replyPortBytes
        }

        /// Adds a data component of `size` bytes.
        @inlinable @inline(__always)
        package mutating func addData(_ size: Int) {
            dataCount += 1
            if size >= WireCodec.ownFrameThreshold {
                ownFrameCount += 1
            } else {
                messageFrameSize += size
                inlineDataBytes += size
            }
        }

        /// Adds a port component whose address has `size` bytes.
        @inlinable @inline(__always)
        package mutating func addPort(_ size: Int) {
            messageFrameSize += size
        }

        /// Adds a descriptor component (`descriptorComponentSize` bytes, inline).
        @inlinable @inline(__always)
        package mutating func addDescriptor() {
            messageFrameSize += WireCodec.descriptorComponentSize
        }

        /// Adds a shared data component: its note (`sharedComponentSize` bytes, inline).
        @inlinable @inline(__always)
        package mutating func addSharedData() {
            messageFrameSize += WireCodec.sharedComponentSize
        }

        /// Decides, once every component was added, whether the data fits the message frame.
        @inlinable @inline(__always)
        package mutating func finish() {
            guard messageFrameSize > WireLimits.default.maxFrameBytes else { return }
            allDataAlone = true
            messageFrameSize -= inlineDataBytes
            ownFrameCount = dataCount
        }

        /// Whether a data component of `size` bytes travels in a frame of its own.
        @inlinable @inline(__always)
        package func dataTravelsAlone(size: Int) -> Bool {
            allDataAlone || size >= WireCodec.ownFrameThreshold
        }
    }

    /// Writes a message frame front to back: the header (at creation), the reply port, then
    /// each component in order (its table entry, and its bytes when it travels inline).
    /// Every write is checked against the layout, so a frame is never written past its end.
    @usableFromInline package struct MessageFrameWriter {
        @usableFromInline let frame: UnsafeMutableRawBufferPointer
        @usableFromInline let layout: Layout
        @usableFromInline var offset: Int

        /// Writes the header into `frame`, which holds exactly `layout.messageFrameSize` bytes.
        @inlinable @inline(__always)
        package init(_ frame: UnsafeMutableRawBufferPointer, layout: Layout, kind: WireKind, messageID: Int32,
                     correlationID: UInt64) {
            precondition(frame.count == layout.messageFrameSize)
            self.frame = frame
            self.layout = layout
            frame[0] = magic.0
            frame[1] = magic.1
            frame[2] = magic.2
            frame[3] = version
            frame[4] = kind.rawValue
            frame[5] = 0 // flags
            frame.storeBytes(of: UInt16(layout.componentCount).littleEndian, toByteOffset: 6, as: UInt16.self)
            frame.storeBytes(of: UInt32(bitPattern: messageID).littleEndian, toByteOffset: 8, as: UInt32.self)
            frame.storeBytes(of: correlationID.littleEndian, toByteOffset: 12, as: UInt64.self)
            frame.storeBytes(of: UInt16(layout.replyPortBytes).littleEndian, toByteOffset: 20, as: UInt16.self)
            offset = fixedHeaderSize + tableEntrySize * layout.componentCount
        }

        /// Writes the reply port's bytes (exactly `layout.replyPortBytes` of them), first.
        @inlinable @inline(__always)
        package mutating func writeReplyPort(_ bytes: UnsafeRawBufferPointer) {
            precondition(bytes.count == layout.replyPortBytes && offset == fixedHeaderSize + tableEntrySize * layout.componentCount)
            copy(bytes)
        }

        /// Writes component `index`'s table entry and, unless it travels alone, its bytes.
        @inlinable @inline(__always)
        package mutating func writeComponent(_ index: Int, isPort: Bool, _ bytes: UnsafeRawBufferPointer) {
            let entry = fixedHeaderSize + tableEntrySize * index
            let alone = !isPort && layout.dataTravelsAlone(size: bytes.count)
            frame[entry] = isPort ? portKind : alone ? ownFrameDataKind : dataKind
            frame.storeBytes(of: UInt32(bytes.count).littleEndian, toByteOffset: entry + 1, as: UInt32.self)
            if !alone { copy(bytes) }
        }

        /// Writes data component `index`'s table entry for `byteCount` bytes and returns
        /// where its bytes go in the frame, for the caller to write there in place: empty when
        /// the component travels in a frame of its own, which the caller fills instead.
        @inlinable @inline(__always)
        package mutating func reserveDataComponent(_ index: Int, byteCount: Int) -> UnsafeMutableRawBufferPointer {
            let entry = fixedHeaderSize + tableEntrySize * index
            let alone = layout.dataTravelsAlone(size: byteCount)
            frame[entry] = alone ? ownFrameDataKind : dataKind
            frame.storeBytes(of: UInt32(byteCount).littleEndian, toByteOffset: entry + 1, as: UInt32.self)
            if alone { return UnsafeMutableRawBufferPointer(start: nil, count: 0) }
            precondition(offset + byteCount <= frame.count)
            defer { offset += byteCount }
            return UnsafeMutableRawBufferPointer(rebasing: frame[offset..<offset + byteCount])
        }

        /// Writes descriptor component `index`: its table entry and its 20 bytes (a token and
        /// an index, `descriptorComponentSize`).
        @inlinable
        package mutating func writeDescriptorComponent(_ index: Int, _ bytes: UnsafeRawBufferPointer) {
            precondition(bytes.count == descriptorComponentSize)
            writeInlineComponent(index, kind: descriptorKind, bytes)
        }

        /// Writes component `index`'s table entry, of kind `kind`, and its bytes inline.
        @inlinable
        mutating func writeInlineComponent(_ index: Int, kind: UInt8, _ bytes: UnsafeRawBufferPointer) {
            let entry = fixedHeaderSize + tableEntrySize * index
            frame[entry] = kind
            frame.storeBytes(of: UInt32(bytes.count).littleEndian, toByteOffset: entry + 1, as: UInt32.self)
            copy(bytes)
        }

        /// Writes shared data component `index`: its table entry and its note's 32 bytes (a
        /// ring's token, then the bytes' start and length in it, `sharedComponentSize`).
        @inlinable
        package mutating func writeSharedDataComponent(_ index: Int, _ bytes: UnsafeRawBufferPointer) {
            precondition(bytes.count == sharedComponentSize)
            writeInlineComponent(index, kind: sharedDataKind, bytes)
        }

        /// Checks that the whole frame was written.
        @inlinable @inline(__always)
        package func finish() {
            precondition(offset == frame.count, "message frame written to \(offset) of \(frame.count) bytes")
        }

        @inlinable @inline(__always)
        mutating func copy(_ bytes: UnsafeRawBufferPointer) {
            precondition(offset + bytes.count <= frame.count)
            if !bytes.isEmpty {
                UnsafeMutableRawBufferPointer(rebasing: frame[offset..<offset + bytes.count]).copyMemory(from: bytes)
            }
            offset += bytes.count
        }
    }

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
