/// Decoding, as bytes: the checks every received message passes, and the codec's model
/// of a decoded message (`WireMessage`). The ports' receiving path
/// (`PortEnvelope.check(_:limits:replyAddresses:)`) runs the same checks on the frames
/// where libzmq put them and builds its message from them directly.
extension WireCodec {
    /// The header of a message whose frames passed every check but the addresses' (which
    /// the caller makes, in component order, as it builds its components), with its reply
    /// port's and components' bytes where they were received. Valid only while the frames
    /// it was read from are.
    @usableFromInline package struct CheckedHeader {
        package let kind: WireKind
        package let messageID: Int32
        package let correlationID: UInt64
        @usableFromInline package let componentCount: Int
        /// How many of the components are ports, whose addresses the caller checks.
        package let portCount: Int
        /// How many of the components the receiver claims from its side channel:
        /// descriptors, and data in shared memory (found in the ring its sender shared).
        /// The common message has none, and reads no more than this of them.
        package let claimCount: Int
        /// The reply port's bytes; empty for none.
        @usableFromInline package let replyPort: UnsafeRawBufferPointer
        /// The message frame, for the component table and the inline components.
        @usableFromInline let messageFrame: UnsafeRawBufferPointer
        /// All frames, for the components that travel alone (frames 1 and up).
        @usableFromInline let frames: UnsafeBufferPointer<UnsafeRawBufferPointer>

        @usableFromInline init(kind: WireKind, messageID: Int32, correlationID: UInt64, componentCount: Int,
                               portCount: Int, claimCount: Int, replyPort: UnsafeRawBufferPointer,
                               messageFrame: UnsafeRawBufferPointer, frames: UnsafeBufferPointer<UnsafeRawBufferPointer>) {
            self.kind = kind
            self.messageID = messageID
            self.correlationID = correlationID
            self.componentCount = componentCount
            self.portCount = portCount
            self.claimCount = claimCount
            self.replyPort = replyPort
            self.messageFrame = messageFrame
            self.frames = frames
        }

        /// The components in order, each with its bytes where they were received.
        @inlinable package var components: Components { Components(self) }

        /// Where the message frame's inline components begin: after the fixed header, the
        /// component table and the reply port.
        @inlinable var inlineStart: Int { fixedHeaderSize + tableEntrySize * componentCount + replyPort.count }

        /// Component 0 (of a message that has one), read straight from the table's first
        /// entry: the common message's only component, without the walk's iterator, which
        /// copies the header.
        @inlinable package var firstComponent: ComponentBytes {
            precondition(componentCount > 0, "component 0 of 0")
            let kind = messageFrame[fixedHeaderSize]
            if kind == ownFrameDataKind { return ComponentBytes(kind: ownFrameDataKind, bytes: frames[1]) }
            let length = Int(UInt32(littleEndian: messageFrame.loadUnaligned(fromByteOffset: fixedHeaderSize + 1,
                                                                             as: UInt32.self)))
            return ComponentBytes(kind: kind,
                                  bytes: UnsafeRawBufferPointer(rebasing: messageFrame[inlineStart..<inlineStart + length]))
        }

        /// Component `index` (below `componentCount`), found by walking the table from the
        /// start: O(`index`). Iterate `components` to visit them all.
        @inlinable package func component(at index: Int) -> ComponentBytes {
            precondition(index >= 0 && index < componentCount, "component \(index) of \(componentCount)")
            if index == 0 { return firstComponent }
            var components = components
            for _ in 0..<index { _ = components.next() }
            return components.next()!
        }
    }

    /// The frames of the message `header` was checked from, each shared data component
    /// made a data component that travels alone (kind `2`), its frame the bytes `resolve`
    /// gives for it (where they lie, in the ring its note names): the message a receiver
    /// would have been sent without shared memory, which checks and reads as any other.
    /// Nil if `resolve` gives nil for a component (a note naming nothing it can read).
    /// `body` gets the frames while they are valid.
    package static func withSharedDataResolved<Value>(
        _ header: CheckedHeader, _ resolve: (ComponentBytes) -> UnsafeRawBufferPointer?,
        _ body: (UnsafeBufferPointer<UnsafeRawBufferPointer>) throws(WireFormatError) -> Value
    ) throws(WireFormatError) -> Value? {
        let tableEnd = fixedHeaderSize + tableEntrySize * header.componentCount
        var frame = [UInt8](header.messageFrame[0..<tableEnd + header.replyPort.count])
        var frames: [UnsafeRawBufferPointer] = [UnsafeRawBufferPointer(start: nil, count: 0)]
        var index = 0
        for component in header.components {
            let entry = fixedHeaderSize + tableEntrySize * index
            index += 1
            if component.isShared {
                guard let bytes = resolve(component), bytes.count <= Int(UInt32.max) else { return nil }
                frame[entry] = ownFrameDataKind
                withUnsafeBytes(of: UInt32(bytes.count).littleEndian) { frame.replaceSubrange(entry + 1..<entry + 5, with: $0) }
                frames.append(bytes)
            } else if component.kind == ownFrameDataKind {
                frames.append(component.bytes)
            } else {
                frame.append(contentsOf: component.bytes)
            }
        }
        var failure: WireFormatError?
        let value = frame.withUnsafeBytes { frame -> Value? in
            frames[0] = frame
            return frames.withUnsafeBufferPointer { frames -> Value? in
                do throws(WireFormatError) {
                    return try body(frames)
                } catch {
                    failure = error
                    return nil
                }
            }
        }
        if let failure { throw failure }
        return value
    }

    /// One component of a checked message: a port's address, a descriptor component's
    /// token and index, a shared data component's note, or a data component's bytes, where
    /// they were received.
    @usableFromInline package struct ComponentBytes {
        /// The component's kind byte (`dataKind`, `ownFrameDataKind`, …).
        @usableFromInline package let kind: UInt8
        @usableFromInline package let bytes: UnsafeRawBufferPointer

        @inlinable init(kind: UInt8, bytes: UnsafeRawBufferPointer) {
            self.kind = kind
            self.bytes = bytes
        }

        @inlinable package var isPort: Bool { kind == portKind }
        @inlinable package var isDescriptor: Bool { kind == descriptorKind }
        /// A data component whose bytes are in shared memory: `bytes` is its note.
        @inlinable package var isShared: Bool { kind == sharedDataKind }

        /// A shared data component's note: the ring's token (its first 16 bytes), where the
        /// bytes start in the ring and how many there are.
        package var sharedReference: (token: UnsafeRawBufferPointer, start: UInt64, length: UInt64) {
            precondition(isShared && bytes.count == sharedComponentSize)
            return (UnsafeRawBufferPointer(rebasing: bytes[0..<16]),
                    UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 16, as: UInt64.self)),
                    UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 24, as: UInt64.self)))
        }

        /// A descriptor component's token (its first 16 bytes) and index (the last 4).
        package var descriptorReference: (token: UnsafeRawBufferPointer, index: UInt32) {
            precondition(isDescriptor && bytes.count == descriptorComponentSize)
            return (UnsafeRawBufferPointer(rebasing: bytes[0..<16]),
                    UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 16, as: UInt32.self)))
        }
    }

    /// The components of a checked message, in order: a walk of the component table that
    /// keeps where the next inline component starts and which frame holds the next one
    /// that travels alone. Trusts the checks `checkedHeader` made.
    @usableFromInline package struct Components: IteratorProtocol, Sequence {
        @usableFromInline let header: CheckedHeader
        @usableFromInline var index = 0
        @usableFromInline var inlineOffset: Int
        @usableFromInline var frameIndex = 1

        @inlinable init(_ header: CheckedHeader) {
            self.header = header
            inlineOffset = header.inlineStart
        }

        @inlinable package mutating func next() -> ComponentBytes? {
            guard index < header.componentCount else { return nil }
            let entry = fixedHeaderSize + tableEntrySize * index
            let kind = header.messageFrame[entry]
            index += 1
            if kind == ownFrameDataKind {
                defer { frameIndex += 1 }
                return ComponentBytes(kind: ownFrameDataKind, bytes: header.frames[frameIndex])
            }
            let length = Int(UInt32(littleEndian: header.messageFrame.loadUnaligned(fromByteOffset: entry + 1, as: UInt32.self)))
            defer { inlineOffset += length }
            return ComponentBytes(kind: kind,
                                  bytes: UnsafeRawBufferPointer(rebasing: header.messageFrame[inlineOffset..<inlineOffset + length]))
        }
    }

    /// The message in `frames`, checked against the format and `limits`: the codec's model
    /// of what a port reads from a socket.
    package static func decode(_ frames: [[UInt8]], limits: WireLimits = .default) throws(WireFormatError) -> WireMessage {
        try withFramesLent(frames) { (frames) throws(WireFormatError) in
            let header = try checkedHeader(frames, limits: limits)
            var replyAddress: String?
            if !header.replyPort.isEmpty {
                guard let address = validatedAddress(header.replyPort, maxBytes: limits.maxAddressBytes) else {
                    throw .replyAddressInvalid
                }
                replyAddress = address
            }
            var components: [WireComponent] = []
            for (index, component) in header.components.enumerated() {
                if component.isPort {
                    guard let address = validatedAddress(component.bytes, maxBytes: limits.maxAddressBytes) else {
                        throw .addressInvalid(component: index)
                    }
                    components.append(.port(address: address))
                } else if component.isDescriptor {
                    let reference = component.descriptorReference
                    components.append(.descriptor(token: [UInt8](reference.token), index: reference.index))
                } else if component.isShared {
                    let reference = component.sharedReference
                    components.append(.sharedData(token: [UInt8](reference.token), start: reference.start,
                                                  length: reference.length))
                } else {
                    components.append(.data([UInt8](component.bytes)))
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
        return try bytes.withUnsafeBufferPointer { buffer throws(WireFormatError) in
            let all = UnsafeRawBufferPointer(buffer)
            var offset = 0
            let views = frames.map { frame in
                defer { offset += frame.count }
                return UnsafeRawBufferPointer(rebasing: all[offset..<offset + frame.count])
            }
            return try views.withUnsafeBufferPointer { lent throws(WireFormatError) in try body(lent) }
        }
    }

    /// Checks `frames` against the format and `limits`, all but the addresses.
    ///
    /// Checks run in this order, so each error names the first problem: frame count zero,
    /// message frame length (4 bytes), magic, version, message frame length (22 bytes),
    /// kind, flags, component count against `limits`, message frame length against the
    /// component table, component kinds, message frame length against the table's lengths,
    /// frame count against the components that travel alone, frame sizes against `limits`,
    /// each lone component's length against its frame; then the caller checks addresses
    /// (`validatedAddress`): the reply port (if any), then each port component in order.
    /// Never traps on any input: every index it reads was checked first.
    @inlinable package static func checkedHeader(_ frames: UnsafeBufferPointer<UnsafeRawBufferPointer>,
                                                 limits: WireLimits) throws(WireFormatError) -> CheckedHeader {
        guard let frame = frames.first else { throw .noFrames }

        // Magic and version first, so that a future version with another header layout
        // is reported as unsupported rather than malformed.
        guard frame.count >= 4 else { throw .headerTooShort(frame.count) }
        guard frame[0] == magic.0, frame[1] == magic.1, frame[2] == magic.2 else { throw .badMagic }
        guard frame[3] == version else { throw .unsupportedVersion(frame[3]) }
        guard frame.count >= fixedHeaderSize else { throw .headerTooShort(frame.count) }

        // From here on, bytes 0..<22 exist.
        guard let kind = WireKind(rawValue: frame[4]) else { throw .unknownKind(frame[4]) }
        guard frame[5] == 0 else { throw .reservedFlags(frame[5]) }
        let componentCount = Int(UInt16(littleEndian: frame.loadUnaligned(fromByteOffset: 6, as: UInt16.self)))
        guard componentCount <= limits.maxComponents else { throw .tooManyComponents(componentCount) }
        let messageID = Int32(bitPattern: UInt32(littleEndian: frame.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
        let correlationID = UInt64(littleEndian: frame.loadUnaligned(fromByteOffset: 12, as: UInt64.self))
        let replyPortBytes = Int(UInt16(littleEndian: frame.loadUnaligned(fromByteOffset: 20, as: UInt16.self)))

        let tableEnd = fixedHeaderSize + tableEntrySize * componentCount
        guard frame.count >= tableEnd else { throw .headerTooShort(frame.count) }
        // From here on, the table exists. At most 65535 lengths below 2^32 each: no overflow.
        var expectedSize = tableEnd + replyPortBytes
        var aloneCount = 0
        var portCount = 0
        var claimCount = 0
        var index = 0
        while index < componentCount {
            let entry = fixedHeaderSize + tableEntrySize * index
            let componentKind = frame[entry]
            let length = Int(UInt32(littleEndian: frame.loadUnaligned(fromByteOffset: entry + 1, as: UInt32.self)))
            switch componentKind {
            case dataKind: expectedSize += length
            case portKind:
                expectedSize += length
                portCount += 1
            case ownFrameDataKind: aloneCount += 1
            case descriptorKind:
                guard length == descriptorComponentSize else {
                    throw .descriptorLengthInvalid(index: index, length: length)
                }
                expectedSize += length
                claimCount += 1
            case sharedDataKind:
                guard length == sharedComponentSize else { throw .sharedLengthInvalid(index: index, length: length) }
                expectedSize += length
                claimCount += 1
            default: throw .unknownComponentKind(index: index, kind: componentKind)
            }
            index += 1
        }
        guard frame.count == expectedSize else { throw .headerLengthMismatch(expected: expectedSize, actual: frame.count) }
        guard frames.count == 1 + aloneCount else {
            throw .frameCountMismatch(expected: 1 + aloneCount, actual: frames.count)
        }
        // From here on, frames 0..<1+aloneCount exist.
        index = 0
        while index < frames.count {
            if frames[index].count > limits.maxFrameBytes { throw .frameTooLarge(index: index, size: frames[index].count) }
            index += 1
        }
        if aloneCount > 0 {
            var frameIndex = 1
            index = 0
            while index < componentCount {
                let entry = fixedHeaderSize + tableEntrySize * index
                if frame[entry] == ownFrameDataKind {
                    let length = Int(UInt32(littleEndian: frame.loadUnaligned(fromByteOffset: entry + 1, as: UInt32.self)))
                    guard frames[frameIndex].count == length else {
                        throw .componentLengthMismatch(index: index, expected: length, actual: frames[frameIndex].count)
                    }
                    frameIndex += 1
                }
                index += 1
            }
        }
        return CheckedHeader(kind: kind, messageID: messageID, correlationID: correlationID,
                             componentCount: componentCount, portCount: portCount, claimCount: claimCount,
                             replyPort: UnsafeRawBufferPointer(rebasing: frame[tableEnd..<tableEnd + replyPortBytes]),
                             messageFrame: frame, frames: frames)
    }
}
