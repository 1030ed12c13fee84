@testable import RunLoopWire
import XCTest

final class WireCodecTests: XCTestCase {
    // MARK: - Frames built by hand

    /// A component as a test writes it: its table kind (0 data inline, 1 port inline, 2 data
    /// in a frame of its own), its bytes and, to contradict them, the length its table
    /// entry announces.
    private struct Part {
        var kind: UInt8
        var bytes: [UInt8]
        var announced: UInt32?

        static func data(_ bytes: [UInt8], announcing length: UInt32? = nil) -> Part {
            Part(kind: 0, bytes: bytes, announced: length)
        }
        static func data(_ text: String) -> Part { Part(kind: 0, bytes: Array(text.utf8)) }
        static func port(_ address: String) -> Part { Part(kind: 1, bytes: Array(address.utf8)) }
        static func port(bytes: [UInt8]) -> Part { Part(kind: 1, bytes: bytes) }
        static func alone(_ bytes: [UInt8], announcing length: UInt32? = nil) -> Part {
            Part(kind: 2, bytes: bytes, announced: length)
        }
        static func descriptor(token: [UInt8], index: UInt32) -> Part {
            Part(kind: 3, bytes: token + withUnsafeBytes(of: index.littleEndian, Array.init))
        }
        static func sharedData(token: [UInt8], start: UInt64, length: UInt64) -> Part {
            Part(kind: 4, bytes: token + withUnsafeBytes(of: start.littleEndian, Array.init)
                 + withUnsafeBytes(of: length.littleEndian, Array.init))
        }
    }

    /// The frames of a message with the given fields, built byte by byte from the format
    /// (independently of the encoder): the message frame (header, component table, reply
    /// port, inline components), then each kind-2 component in a frame of its own. The
    /// `count` and `replyPortLength` arguments contradict the parts, for the error tests.
    private func frames(
        magic: [UInt8] = [0x52, 0x4C, 0x4B],
        version: UInt8 = 3,
        kind: UInt8 = 0,
        flags: UInt8 = 0,
        count: UInt16? = nil,
        messageID: Int32 = 0,
        correlationID: UInt64 = 0,
        replyPort: [UInt8] = [],
        replyPortLength: UInt16? = nil,
        _ parts: [Part] = []
    ) -> [[UInt8]] {
        var frame = magic + [version, kind, flags]
        frame += littleEndian(UInt64(count ?? UInt16(parts.count)), bytes: 2)
        frame += littleEndian(UInt64(UInt32(bitPattern: messageID)), bytes: 4)
        frame += littleEndian(correlationID, bytes: 8)
        frame += littleEndian(UInt64(replyPortLength ?? UInt16(replyPort.count)), bytes: 2)
        for part in parts {
            frame += [part.kind] + littleEndian(UInt64(part.announced ?? UInt32(part.bytes.count)), bytes: 4)
        }
        frame += replyPort
        for part in parts where part.kind != 2 { frame += part.bytes }
        return [frame] + parts.filter { $0.kind == 2 }.map(\.bytes)
    }

    private func littleEndian(_ value: UInt64, bytes: Int) -> [UInt8] {
        (0..<bytes).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    private func assertDecodeThrows(
        _ frames: [[UInt8]],
        limits: WireLimits = .default,
        _ expected: WireFormatError,
        file: StaticString = #filePath,
        line: UInt = #line
    ) {
        XCTAssertThrowsError(try WireCodec.decode(frames, limits: limits), file: file, line: line) { error in
            XCTAssertEqual(error as? WireFormatError, expected, file: file, line: line)
        }
    }

    /// Encodes `message`, checks that the encoder wrote `expected` when given, and that the
    /// frames decode to the message.
    private func assertRoundTrips(_ message: WireMessage, as expected: [[UInt8]]? = nil,
                                  file: StaticString = #filePath, line: UInt = #line) {
        let frames = WireCodec.encode(message)
        if let expected { XCTAssertEqual(frames, expected, file: file, line: line) }
        XCTAssertEqual(try WireCodec.decode(frames), message, file: file, line: line)
    }

    // MARK: - Round trips

    func testAMessageWithoutComponentsRoundTripsAsOneFrameOfTheHeaderAlone() {
        let message = WireMessage(messageID: 7)
        assertRoundTrips(message, as: frames(messageID: 7))
        XCTAssertEqual(WireCodec.encode(message).map(\.count), [22])
    }

    func testSmallDataAndPortComponentsRoundTripInOrderInTheMessageFrame() {
        let message = WireMessage(
            messageID: -123_456,
            components: [
                .data([1, 2, 3]),
                .port(address: "inproc://rlk.3f2a"),
                .data([]),
                .port(address: "ipc:///run/user/0/runloopkit/naïve"),
                .data(Array(repeating: 0xAB, count: 65535)), // the largest that travels inline
                .port(address: "tcp://127.0.0.1:5555"),
            ]
        )
        assertRoundTrips(message, as: frames(messageID: -123_456, [
            .data([1, 2, 3]), .port("inproc://rlk.3f2a"), .data([]), .port("ipc:///run/user/0/runloopkit/naïve"),
            .data(Array(repeating: 0xAB, count: 65535)), .port("tcp://127.0.0.1:5555"),
        ]))
        XCTAssertEqual(WireCodec.encode(message).count, 1)
    }

    func testADataComponentOf70000BytesTravelsAloneInFrameOne() {
        let large = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let message = WireMessage(messageID: 5, components: [.data(large)])
        let encoded = WireCodec.encode(message)
        XCTAssertEqual(encoded.count, 2)
        XCTAssertEqual(encoded[0].count, 22 + 5, "only the header and the table: the bytes are not copied in")
        XCTAssertEqual(Array(encoded[0][22..<27]), [2, 0x70, 0x11, 0x01, 0x00], "kind 2, length 70000")
        XCTAssertEqual(encoded[1], large)
        assertRoundTrips(message, as: frames(messageID: 5, [.alone(large)]))
    }

    func testTheFirstComponentReadStraightFromTheTableIsTheWalksFirst() throws {
        let large = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 3) }
        let messages = [
            WireMessage(messageID: 1, components: [.data([1, 2, 3])]),
            WireMessage(messageID: 2, replyAddress: "inproc://rlk.reply", components: [.data([4, 5]), .data([6])]),
            WireMessage(messageID: 3, components: [.port(address: "inproc://rlk.first"), .data([7])]),
            WireMessage(messageID: 4, replyAddress: "inproc://rlk.reply", components: [.data(large), .data([8])]),
            WireMessage(messageID: 5, components: [.data([])]),
        ]
        for message in messages {
            let read = try WireCodec.withFramesLent(WireCodec.encode(message)) { (frames) throws(WireFormatError) in
                let header = try WireCodec.checkedHeader(frames, limits: .default)
                let walked = header.components.first(where: { _ in true })!
                let first = header.firstComponent
                let atZero = header.component(at: 0)
                return [(first.isPort, Array(first.bytes)), (walked.isPort, Array(walked.bytes)),
                        (atZero.isPort, Array(atZero.bytes))]
            }
            XCTAssertEqual(read.map(\.0), Array(repeating: read[1].0, count: 3), "message \(message.messageID)")
            XCTAssertEqual(read.map(\.1), Array(repeating: read[1].1, count: 3), "message \(message.messageID)")
            switch message.components[0] {
            case .data(let bytes): XCTAssertEqual(read[0].1, bytes)
            case .port(let address): XCTAssertEqual(read[0].1, Array(address.utf8))
            case .descriptor(let token, let index): XCTAssertEqual(read[0].1, token + withUnsafeBytes(of: index.littleEndian, Array.init))
            case .sharedData(let token, let start, let length):
                XCTAssertEqual(read[0].1, token + withUnsafeBytes(of: start.littleEndian, Array.init)
                               + withUnsafeBytes(of: length.littleEndian, Array.init))
            }
        }
    }

    func testInlineAndLoneComponentsMixInTableOrder() {
        let first = Array(repeating: UInt8(1), count: 65536) // the smallest that travels alone
        let second = Array(repeating: UInt8(2), count: 70_000)
        let message = WireMessage(
            kind: .request, messageID: 42, correlationID: 0xFEED, replyAddress: "inproc://back",
            components: [
                .data(Array("head".utf8)), .data(first), .port(address: "tcp://10.0.0.1:1"),
                .data(second), .data([]), .data(Array("tail".utf8)),
            ]
        )
        let expected = frames(kind: 1, messageID: 42, correlationID: 0xFEED, replyPort: Array("inproc://back".utf8), [
            .data("head"), .alone(first), .port("tcp://10.0.0.1:1"), .alone(second), .data([]), .data("tail"),
        ])
        assertRoundTrips(message, as: expected)
        XCTAssertEqual(expected.map(\.count), [22 + 5 * 6 + 13 + 4 + 16 + 0 + 4, 65536, 70_000])
    }

    func testEveryKindRoundTripsWithReplyAddressAndExtremeIDs() {
        for kind in [WireKind.message, .request, .reply, .failure] {
            assertRoundTrips(WireMessage(
                kind: kind, messageID: .min, correlationID: .max, replyAddress: "tcp://[::1]:6000",
                components: [.data([0])]
            ), as: frames(kind: kind.rawValue, messageID: .min, correlationID: .max,
                          replyPort: Array("tcp://[::1]:6000".utf8), [.data([0])]))
            assertRoundTrips(WireMessage(kind: kind, messageID: .max, correlationID: 1))
        }
    }

    /// Receivers accept any mix: a small component alone and a large one inline read the
    /// same as where the encoder puts them.
    func testTheDecoderAcceptsSmallComponentsAloneAndLargeOnesInline() throws {
        let large = Array(repeating: UInt8(9), count: 70_000)
        let message = WireMessage(messageID: 3, components: [.data([1, 2]), .data(large), .data([])])
        XCTAssertEqual(try WireCodec.decode(frames(messageID: 3, [.alone([1, 2]), .data(large), .alone([])])), message)
        XCTAssertEqual(try WireCodec.decode(frames(messageID: 3, [.alone([1, 2]), .alone(large), .alone([])])), message)
        XCTAssertEqual(WireCodec.encode(message), frames(messageID: 3, [.data([1, 2]), .alone(large), .data([])]))
    }

    func testTheEncoderWritesExactlyTheseBytes() {
        let encoded = WireCodec.encode(WireMessage(
            kind: .request,
            messageID: 0x0102_0304,
            correlationID: 0x0A0B_0C0D_0E0F_1011,
            replyAddress: "inproc://r",
            components: [.port(address: "inproc://p"), .data([9])]
        ))
        let r = Array("inproc://r".utf8), p = Array("inproc://p".utf8)
        XCTAssertEqual(encoded, [
            [0x52, 0x4C, 0x4B, 3, 1, 0, // magic, version, kind, flags
             2, 0, // two components
             0x04, 0x03, 0x02, 0x01, // message id
             0x11, 0x10, 0x0F, 0x0E, 0x0D, 0x0C, 0x0B, 0x0A, // correlation id
             10, 0, // the reply port's length
             1, 10, 0, 0, 0, // a port of 10 bytes
             0, 1, 0, 0, 0] // data of 1 byte
                + r + p + [9],
        ])
    }

    func testAnEmptyReplyAddressIsEncodedAsLengthZeroAndDecodesAsNone() throws {
        let encoded = WireCodec.encode(WireMessage(messageID: 1, replyAddress: ""))
        XCTAssertEqual(encoded, frames(messageID: 1))
        XCTAssertEqual(Array(encoded[0][20..<22]), [0, 0])
        XCTAssertNil(try WireCodec.decode(encoded).replyAddress)
    }

    // MARK: - The 64 MiB rule (sizes only: nothing of 64 MiB is allocated)

    func testTheLayoutPutsDataOf64KiBOrMoreAloneAndCountsTheMessageFrame() {
        var layout = WireCodec.Layout(componentCount: 4, replyPortBytes: 13)
        layout.addData(100)
        layout.addPort(20)
        layout.addData(65536)
        layout.addData(65535)
        layout.finish()
        XCTAssertEqual(layout.messageFrameSize, 22 + 5 * 4 + 13 + 100 + 20 + 65535)
        XCTAssertEqual(layout.ownFrameCount, 1)
        XCTAssertFalse(layout.dataTravelsAlone(size: 65535))
        XCTAssertTrue(layout.dataTravelsAlone(size: 65536))
    }

    /// 1023 components of 65535 bytes and one more: a message frame of exactly 64 MiB keeps
    /// its data inline; one byte more and every data component travels alone, the empty one
    /// too, and the message frame keeps the header, the table, the reply port and the ports.
    func testAMessageFrameOver64MiBSendsEveryDataComponentAlone() {
        let limit = WireLimits.default.maxFrameBytes
        XCTAssertEqual(limit, 64 << 20)
        let headerAndTable = 22 + 5 * 1026 + 13 + 20 // with a reply port, a port and an empty data component
        let last = limit - headerAndTable - 1023 * 65535
        func layout(lastSize: Int) -> WireCodec.Layout {
            var layout = WireCodec.Layout(componentCount: 1026, replyPortBytes: 13)
            layout.addPort(20)
            layout.addData(0)
            for _ in 0..<1023 { layout.addData(65535) }
            layout.addData(lastSize)
            layout.finish()
            return layout
        }
        let fits = layout(lastSize: last)
        XCTAssertEqual(fits.messageFrameSize, limit)
        XCTAssertEqual(fits.ownFrameCount, 0)
        XCTAssertFalse(fits.dataTravelsAlone(size: 0))

        let over = layout(lastSize: last + 1)
        XCTAssertEqual(over.messageFrameSize, headerAndTable)
        XCTAssertEqual(over.ownFrameCount, 1025)
        XCTAssertTrue(over.dataTravelsAlone(size: 0))
        XCTAssertTrue(over.dataTravelsAlone(size: 65535))
    }

    /// The same message written through `MessageFrameWriter` and checked by the decoder:
    /// the lone frames all lend bytes of one 64 KiB buffer, as a socket lends its frames.
    func testAMessageFrameOver64MiBIsWrittenWithEveryDataEntryOfKindTwoAndDecodes() throws {
        let count = 1026
        var layout = WireCodec.Layout(componentCount: count, replyPortBytes: 0)
        layout.addData(0)
        for _ in 1..<count { layout.addData(65535) }
        layout.finish()
        XCTAssertEqual(layout.ownFrameCount, count)
        let shared = [UInt8](repeating: 0x5A, count: 65535)
        var messageFrame = [UInt8](repeating: 0xEE, count: layout.messageFrameSize)
        shared.withUnsafeBytes { shared in
            messageFrame.withUnsafeMutableBytes { frame in
                var writer = WireCodec.MessageFrameWriter(frame, layout: layout, kind: .message, messageID: 1, correlationID: 0)
                writer.writeReplyPort(UnsafeRawBufferPointer(rebasing: shared[0..<0]))
                for index in 0..<count {
                    writer.writeComponent(index, isPort: false, UnsafeRawBufferPointer(rebasing: shared[0..<(index == 0 ? 0 : 65535)]))
                }
                writer.finish()
            }
        }
        XCTAssertEqual(messageFrame, frames(messageID: 1, [.alone([])] + Array(repeating: .alone([], announcing: 65535), count: count - 1))[0])

        let limits = WireLimits(maxComponents: count)
        let checked = try messageFrame.withUnsafeBytes { messageFrame in
            try shared.withUnsafeBytes { shared in
                let lent = [messageFrame, UnsafeRawBufferPointer(rebasing: shared[0..<0])]
                    + Array(repeating: shared, count: count - 1)
                return try lent.withUnsafeBufferPointer { frames in
                    let header = try WireCodec.checkedHeader(frames, limits: limits)
                    return (header.componentCount, header.components.map(\.bytes.count), header.components.allSatisfy { !$0.isPort })
                }
            }
        }
        XCTAssertEqual(checked.0, count)
        XCTAssertEqual(checked.1, [0] + Array(repeating: 65535, count: count - 1))
        XCTAssertTrue(checked.2)
    }

    // MARK: - The documented examples, read from the document

    private func document() throws -> String {
        try String(contentsOfFile: #filePath.replacingOccurrences(
            of: "Tests/RunLoopWireTests/WireCodecTests.swift", with: "docs/wire-format.md"), encoding: .utf8)
    }

    /// The bytes the document shows after `marker`, up to the closing backquote.
    private func documentedHex(after marker: String) throws -> [UInt8] {
        let document = try document()
        let start = try XCTUnwrap(document.range(of: marker)?.upperBound, "the document shows \(marker)")
        return try document[start...].prefix { $0 != "`" }.split(separator: " ").map {
            try XCTUnwrap(UInt8($0, radix: 16), "not a hex byte after \(marker): \($0)")
        }
    }

    /// The worked example of `docs/wire-format.md`, a check-in message (id 100, one port,
    /// no reply port), from its annotated dump: on each line, the hex bytes before the
    /// annotation.
    func testTheDocumentedCheckInExampleIsWhatTheEncoderWrites() throws {
        let document = try document()
        let section = try XCTUnwrap(document.range(of: "## Worked example: a check-in message")?.upperBound)
        let blockStart = try XCTUnwrap(document.range(of: "```\n", range: section..<document.endIndex)?.upperBound)
        let blockEnd = try XCTUnwrap(document.range(of: "```", range: blockStart..<document.endIndex)?.lowerBound)
        var bytes: [UInt8] = []
        for line in document[blockStart..<blockEnd].split(separator: "\n") {
            for token in line.split(separator: " ") {
                guard token.count == 2, let byte = UInt8(token, radix: 16) else { break }
                bytes.append(byte)
            }
        }
        XCTAssertEqual(bytes.count, 47)
        let expected = WireMessage(messageID: 100, components: [.port(address: "tcp://127.0.0.1:5556")])
        XCTAssertEqual(WireCodec.encode(expected), [bytes])
        XCTAssertEqual(try WireCodec.decode([bytes]), expected)
    }

    /// The large-component example: message 5, 100,000 bytes alone then "hi" inline.
    func testTheDocumentedLargeComponentExampleIsWhatTheEncoderWrites() throws {
        let messageFrame = try documentedHex(after: "The large message's frame 0 in hex: `")
        let large = [UInt8](repeating: 0, count: 100_000)
        let message = WireMessage(messageID: 5, components: [.data(large), .data(Array("hi".utf8))])
        XCTAssertEqual(WireCodec.encode(message), [messageFrame, large])
        XCTAssertEqual(try WireCodec.decode([messageFrame, large]), message)
    }

    /// The request and reply examples: request 7 (correlation id 0x1234, "ping") and the
    /// reply "pong:ping".
    func testTheDocumentedRequestAndReplyAreWhatTheEncoderWrites() throws {
        let request = WireMessage(kind: .request, messageID: 7, correlationID: 0x1234, components: [.data(Array("ping".utf8))])
        XCTAssertEqual(WireCodec.encode(request), [try documentedHex(after: "The request's frame 0 in hex: `")])
        let reply = WireMessage(kind: .reply, messageID: 7, correlationID: 0x1234, components: [.data(Array("pong:ping".utf8))])
        XCTAssertEqual(WireCodec.encode(reply), [try documentedHex(after: "the reply's frame 0 in hex: `")])
    }

    /// The failure example of `docs/wire-format.md`, read from the document itself: what
    /// a port sends when the handler of request 9 (correlation id 0x1235) threw.
    func testTheDocumentedFailureExampleIsWhatTheEncoderWrites() throws {
        let messageFrame = try documentedHex(after: "The failure's frame 0 in hex: `")
        let failure = WireMessage(kind: .failure, messageID: 9, correlationID: 0x1235,
                                  components: [.data(Array("job refused: fail".utf8))])
        XCTAssertEqual(WireCodec.encode(failure), [messageFrame])
        XCTAssertEqual(try WireCodec.decode([messageFrame]), failure)
    }

    // MARK: - One test per error

    func testNoFramesIsRejected() {
        assertDecodeThrows([], .noFrames)
    }

    func testAMessageFrameTooShortForTheVersionIsRejected() {
        assertDecodeThrows([[0x52, 0x4C, 0x4B]], .headerTooShort(3))
        assertDecodeThrows([[]], .headerTooShort(0))
    }

    func testAMessageFrameShorterThanTheTwentyTwoByteHeaderIsRejected() {
        assertDecodeThrows([Array(frames()[0].prefix(21))], .headerTooShort(21))
        assertDecodeThrows([Array(frames()[0].prefix(4))], .headerTooShort(4))
    }

    func testAMessageFrameTooShortForItsComponentTableIsRejected() {
        // Two components announced, the table cut after the first entry.
        let cut = Array(frames([.data([]), .data([])])[0].prefix(27))
        assertDecodeThrows([cut], .headerTooShort(27))
        // No table at all for one component.
        assertDecodeThrows([frames(count: 1)[0]], .headerTooShort(22))
    }

    func testABadMagicIsRejected() {
        assertDecodeThrows(frames(magic: [0x52, 0x4C, 0x4C]), .badMagic)
        assertDecodeThrows([[0, 0, 0, 0]], .badMagic)
    }

    /// Version 2 and version 1 messages are dropped as unsupported, whatever their
    /// length, and so is any later version: magic and version are read first.
    func testAnUnknownVersionIsRejectedWhateverTheFrameLength() {
        // A version-2 check-in: a 21-byte header (one kind byte per component), an empty
        // reply-port frame, the port in a frame of its own.
        let versionTwo: [[UInt8]] = [
            [0x52, 0x4C, 0x4B, 2, 0, 0, 1, 0, 100, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            [],
            Array("tcp://127.0.0.1:5556".utf8),
        ]
        assertDecodeThrows(versionTwo, .unsupportedVersion(2))
        assertDecodeThrows(frames(version: 1), .unsupportedVersion(1))
        assertDecodeThrows(frames(version: 4), .unsupportedVersion(4))
        assertDecodeThrows([[0x52, 0x4C, 0x4B, 0]], .unsupportedVersion(0))
    }

    func testAnUnknownKindIsRejected() {
        assertDecodeThrows(frames(kind: 7), .unknownKind(7))
        // A statistics query too: only a port's receive path takes it back from the rejection.
        assertDecodeThrows([WireCodec.statisticsQuery(correlationID: 1)], .unknownKind(6))
    }

    func testAStatisticsQueryIsAHeaderAloneWithANonzeroCorrelationID() {
        func ids(_ frames: [[UInt8]]) -> (Int32, UInt64)? {
            try? WireCodec.withFramesLent(frames) { lent throws(WireFormatError) in
                WireCodec.statisticsQueryIDs(lent).map { ($0.messageID, $0.correlationID) }
            }
        }
        let query = WireCodec.statisticsQuery(messageID: -3, correlationID: 0x5157)
        XCTAssertEqual(query.count, WireCodec.fixedHeaderSize)
        XCTAssertEqual(ids([query])?.0, -3)
        XCTAssertEqual(ids([query])?.1, 0x5157)
        XCTAssertNil(ids([WireCodec.statisticsQuery(correlationID: 0)]), "a correlation id of 0")
        XCTAssertNil(ids([query + [0]]), "anything after the header")
        XCTAssertNil(ids([query, []]), "a second frame")
        var withComponent = query
        withComponent[6] = 1
        XCTAssertNil(ids([withComponent]), "a component count")
        var request = query
        request[4] = 1
        XCTAssertNil(ids([request]), "another kind")
    }

    func testReservedFlagsAreRejected() {
        assertDecodeThrows(frames(flags: 0x80), .reservedFlags(0x80))
    }

    func testMoreComponentsThanTheLimitAreRejected() {
        let limits = WireLimits(maxComponents: 2)
        assertDecodeThrows(frames([.data([]), .data([]), .data([])]), limits: limits, .tooManyComponents(3))
        XCTAssertNoThrow(try WireCodec.decode(frames([.data([]), .data([])]), limits: limits))
        // Checked before the table is read: no table follows.
        assertDecodeThrows([frames(count: 1025)[0]], .tooManyComponents(1025))
    }

    func testAnUnknownComponentKindIsRejected() {
        assertDecodeThrows(frames([.data([1]), Part(kind: 5, bytes: [2]), Part(kind: 0xFF, bytes: [])]),
                           .unknownComponentKind(index: 1, kind: 5))
    }

    func testAMessageWithSharedDataResolvedReadsAsTheSameMessageWithThoseBytesAlone() throws {
        let token = Array(UInt8(0)..<16)
        let ring = Array(repeating: UInt8(7), count: 100) + Array(UInt8(0)..<200) // bytes 100..<300 named by the note
        let big = Array(repeating: UInt8(9), count: 70_000) // alone already
        let message = WireMessage(messageID: 7, replyAddress: "ipc://r", components: [
            .data([1, 2]), .sharedData(token: token, start: 100, length: 200), .port(address: "ipc://x"), .data(big),
        ])
        let resolved = try ring.withUnsafeBytes { ringBytes in
            try WireCodec.withFramesLent(WireCodec.encode(message)) { (frames) throws(WireFormatError) -> WireMessage? in
                let header = try WireCodec.checkedHeader(frames, limits: .default)
                return try WireCodec.withSharedDataResolved(header, { component in
                    let note = component.sharedReference
                    return UnsafeRawBufferPointer(rebasing: ringBytes[Int(note.start)..<Int(note.start + note.length)])
                }) { (frames) throws(WireFormatError) -> WireMessage in
                    XCTAssertEqual(frames.count, 3, "the message frame, the resolved bytes, the large component")
                    return try WireCodec.decode(frames.map(Array.init))
                }
            }
        }
        XCTAssertEqual(resolved, WireMessage(messageID: 7, replyAddress: "ipc://r", components: [
            .data([1, 2]), .data(Array(UInt8(0)..<200)), .port(address: "ipc://x"), .data(big),
        ]))
        let unresolved = try WireCodec.withFramesLent(WireCodec.encode(message)) { (frames) throws(WireFormatError) -> Int? in
            try WireCodec.withSharedDataResolved(try WireCodec.checkedHeader(frames, limits: .default), { _ in nil }) { _ in 1 }
        }
        XCTAssertNil(unresolved, "a note naming nothing readable resolves to nothing")
    }

    func testASharedDataComponentRoundTripsAsItsNoteInTheMessageFrameAndAnyOtherLengthIsRejected() {
        let token = Array(UInt8(0)..<16)
        let message = WireMessage(messageID: 7, components: [
            .data([1]), .sharedData(token: token, start: 0x1_0000, length: 0x10_0000), .port(address: "ipc://x"),
        ])
        assertRoundTrips(message, as: frames(messageID: 7, [
            .data([1]), .sharedData(token: token, start: 0x1_0000, length: 0x10_0000), .port("ipc://x"),
        ]))
        let frame = WireCodec.encode(message)[0]
        XCTAssertEqual(frame[22 + 5], 4, "kind 4")
        XCTAssertEqual(Array(frame[22 + 5 + 1..<22 + 5 + 5]), [32, 0, 0, 0], "always 32 bytes")
        for length in [0, 31, 33] {
            assertDecodeThrows(frames([.data([1]), Part(kind: 4, bytes: Array(repeating: 0, count: length))]),
                               .sharedLengthInvalid(index: 1, length: length))
        }
    }

    func testADescriptorComponentRoundTripsAsItsTokenAndIndexInTheMessageFrame() {
        let token = Array(UInt8(0)..<16)
        let message = WireMessage(messageID: 5, components: [
            .data([1]), .descriptor(token: token, index: 0), .port(address: "ipc://x"), .descriptor(token: token, index: 7),
        ])
        assertRoundTrips(message, as: frames(messageID: 5, [
            .data([1]), .descriptor(token: token, index: 0), .port("ipc://x"), .descriptor(token: token, index: 7),
        ]))
        let frame = WireCodec.encode(message)[0]
        XCTAssertEqual(frame[22 + 5], 3, "kind 3")
        XCTAssertEqual(Array(frame[22 + 5 + 1..<22 + 5 + 5]), [20, 0, 0, 0], "20 bytes")
        XCTAssertEqual(frame.count, 22 + 4 * 5 + 1 + 20 + 7 + 20)
    }

    func testADescriptorComponentOfAnyLengthBut20IsRejectedWhereItsTableEntryIs() {
        for length in [0, 1, 19, 21, 4096] {
            assertDecodeThrows(frames([.data([1]), Part(kind: 3, bytes: Array(repeating: 9, count: length))]),
                               .descriptorLengthInvalid(index: 1, length: length))
        }
        // A length of 2^32 - 1: rejected as announced, before the frame's length is compared.
        assertDecodeThrows(frames([Part(kind: 3, bytes: [], announced: .max)]),
                           .descriptorLengthInvalid(index: 0, length: Int(UInt32.max)))
    }

    func testAMessageFrameWhoseLengthDisagreesWithItsTableIsRejected() {
        // One byte missing from the inline bytes, and one byte too many.
        var short = frames([.data([1, 2, 3])])
        short[0].removeLast()
        assertDecodeThrows(short, .headerLengthMismatch(expected: 30, actual: 29))
        var long = frames([.data([1, 2, 3])])
        long[0].append(0)
        assertDecodeThrows(long, .headerLengthMismatch(expected: 30, actual: 31))
        // A reply port length beyond the frame.
        assertDecodeThrows(frames(replyPortLength: 5), .headerLengthMismatch(expected: 27, actual: 22))
        // An inline length of 2^32 - 1: no overflow, just a mismatch.
        assertDecodeThrows(frames([.data([], announcing: .max)]), .headerLengthMismatch(expected: 27 + Int(UInt32.max), actual: 27))
        // A lone component's bytes do not belong in the message frame.
        let lone = frames([.alone([1, 2, 3])])
        assertDecodeThrows([lone[0] + [1, 2, 3], lone[1]], .headerLengthMismatch(expected: 27, actual: 30))
    }

    func testAFrameCountThatDisagreesWithTheLoneComponentsIsRejected() {
        let twoAlone = frames([.alone([1]), .data([2]), .alone([3])])
        assertDecodeThrows(Array(twoAlone.prefix(2)), .frameCountMismatch(expected: 3, actual: 2))
        assertDecodeThrows([twoAlone[0]], .frameCountMismatch(expected: 3, actual: 1))
        assertDecodeThrows(twoAlone + [[4]], .frameCountMismatch(expected: 3, actual: 4))
        // A frame after a message with none alone (a version-2 sender's reply-port frame, say).
        assertDecodeThrows(frames([.data([1])]) + [[]], .frameCountMismatch(expected: 1, actual: 2))
    }

    func testAMessageFrameLargerThanTheLimitIsRejected() {
        let limits = WireLimits(maxFrameBytes: 32)
        // 22 + 5 + 6 = 33 bytes.
        assertDecodeThrows(frames([.data([1, 2, 3, 4, 5, 6])]), limits: limits, .frameTooLarge(index: 0, size: 33))
        XCTAssertNoThrow(try WireCodec.decode(frames([.data([1, 2, 3, 4, 5])]), limits: limits))
    }

    func testALoneFrameLargerThanTheLimitIsRejected() {
        let limits = WireLimits(maxFrameBytes: 32)
        let large = [UInt8](repeating: 7, count: 33)
        assertDecodeThrows(frames([.alone([1]), .alone(large)]), limits: limits, .frameTooLarge(index: 2, size: 33))
        XCTAssertNoThrow(try WireCodec.decode(frames([.alone([1]), .alone(Array(large.dropLast()))]), limits: limits))
        // Checked before the lone frames' lengths: a frame too large whose length is wrong too.
        assertDecodeThrows(frames([.alone(large, announcing: 3)]), limits: limits, .frameTooLarge(index: 1, size: 33))
    }

    func testALoneFrameWhoseLengthDisagreesWithItsTableIsRejected() {
        assertDecodeThrows(frames([.data([0]), .alone([1, 2], announcing: 3)]),
                           .componentLengthMismatch(index: 1, expected: 3, actual: 2))
        assertDecodeThrows(frames([.alone([1]), .port("inproc://p"), .alone([1, 2, 3], announcing: 0)]),
                           .componentLengthMismatch(index: 2, expected: 0, actual: 3))
        // The first mismatch in table order is the one reported.
        assertDecodeThrows(frames([.alone([1], announcing: 2), .alone([1], announcing: 0)]),
                           .componentLengthMismatch(index: 0, expected: 2, actual: 1))
    }

    private static let invalidAddresses: [[UInt8]] = [
        [0xFF, 0xFE], // not UTF-8
        Array("inproc://".utf8) + [0xC3], // truncated UTF-8
        Array("udp://127.0.0.1:1".utf8), // unknown scheme
        Array("INPROC://p".utf8), // schemes are case-sensitive, as in libzmq
        Array("inproc://".utf8), // nothing after the scheme
        Array("inproc://a\0b".utf8), // a NUL would cut the endpoint libzmq sees
        Array("tcp://host:1\n".utf8), // control character
        Array("tcp://host:1\u{7F}".utf8), // DEL
    ]

    func testAnInvalidReplyPortIsRejected() {
        for address in Self.invalidAddresses {
            assertDecodeThrows(frames(replyPort: address), .replyAddressInvalid)
            // The reply port is checked before the port components.
            assertDecodeThrows(frames(replyPort: address, [.port(bytes: address)]), .replyAddressInvalid)
        }
        // Too long: over maxAddressBytes (1024 by default).
        let long = Array("inproc://".utf8) + Array(repeating: UInt8(ascii: "x"), count: 1016)
        XCTAssertNoThrow(try WireCodec.decode(frames(replyPort: Array(long.dropLast()))))
        assertDecodeThrows(frames(replyPort: long), .replyAddressInvalid)
        assertDecodeThrows(frames(replyPort: Array("inproc://abcdef".utf8)), limits: WireLimits(maxAddressBytes: 10),
                           .replyAddressInvalid)
    }

    func testAnInvalidPortComponentIsRejectedWithItsComponentIndex() {
        let port = Part.port("inproc://p")
        for address in Self.invalidAddresses {
            assertDecodeThrows(frames([.port(bytes: address)]), .addressInvalid(component: 0))
            // Component indices count data components, inline or alone, and the first invalid port is named.
            assertDecodeThrows(frames(replyPort: Array("inproc://r".utf8),
                                      [.data([1]), .alone([2]), port, .port(bytes: address), .port(bytes: address)]),
                               .addressInvalid(component: 3))
        }
        // An empty port address is invalid; only the reply port may be empty (length 0: none).
        assertDecodeThrows(frames([.port(bytes: [])]), .addressInvalid(component: 0))
        let long = Array("inproc://".utf8) + Array(repeating: UInt8(ascii: "x"), count: 1016)
        XCTAssertNoThrow(try WireCodec.decode(frames([.port(bytes: Array(long.dropLast()))])))
        assertDecodeThrows(frames([port, .port(bytes: long)]), .addressInvalid(component: 1))
    }

    func testIsValidAddressAppliesTheDecodersRules() {
        XCTAssertTrue(WireCodec.isValidAddress("inproc://rlk.3f2a"))
        XCTAssertTrue(WireCodec.isValidAddress("ipc:///run/user/0/runloopkit/name"))
        XCTAssertTrue(WireCodec.isValidAddress("tcp://127.0.0.1:5555"))
        XCTAssertFalse(WireCodec.isValidAddress(""))
        XCTAssertFalse(WireCodec.isValidAddress("tcp://"))
        XCTAssertFalse(WireCodec.isValidAddress("pgm://eth0;239.192.1.1:5555"))
        XCTAssertFalse(WireCodec.isValidAddress("inproc://a\u{0}b"))
        XCTAssertFalse(WireCodec.isValidAddress("inproc://abcdef", maxBytes: 10))
    }

    func testErrorDescriptionsSayWhatIsWrong() {
        XCTAssertEqual(WireFormatError.frameCountMismatch(expected: 3, actual: 2).description,
                       "message has 2 frames where its header announces 3")
        XCTAssertEqual(WireFormatError.reservedFlags(0x80).description, "reserved header flags set: 0x80")
        XCTAssertEqual(WireFormatError.componentLengthMismatch(index: 1, expected: 3, actual: 2).description,
                       "component 1 is 2 bytes where its header announces 3")
        XCTAssertEqual(WireFormatError.addressInvalid(component: 4).description, "component 4 is not a valid port address")
    }

    // MARK: - Robustness

    /// Decoding random and mutated frames never traps, and whatever it accepts is exactly
    /// the frames it came from: built again by hand from the decoded message, with each
    /// data component where the frames had it (inline or alone), they are the same bytes
    /// (so nothing in the frames is ignored or altered); and the encoder writes them when
    /// they put each component where the encoder would.
    func testDecodingRandomAndMutatedFramesNeverTrapsAndAcceptedFramesAreRebuiltExactly() {
        var random = SplitMix64(seed: 0x524C_4B03)
        let seeds: [[[UInt8]]] = [
            WireCodec.encode(WireMessage(messageID: 100, components: [.port(address: "tcp://127.0.0.1:5556")])),
            WireCodec.encode(WireMessage(
                kind: .request, messageID: 5, correlationID: 9, replyAddress: "inproc://reply",
                components: [.data([1, 2]), .port(address: "ipc:///tmp/x"), .data([])]
            )),
            WireCodec.encode(WireMessage(kind: .reply, messageID: -1, correlationID: 3)),
            WireCodec.encode(WireMessage(kind: .failure, messageID: 9, correlationID: 4, components: [.data(Array("no".utf8))])),
            frames(kind: 0, messageID: 2, [.alone([1, 2, 3]), .data([4]), .alone([]), .port("inproc://q")]),
            // At the frame limit (96 bytes): the message frame and the lone frame.
            frames(messageID: 6, [.alone(Array(repeating: 0xA5, count: 96)), .data(Array(repeating: 0x5A, count: 64))]),
        ]
        let limits = WireLimits(maxComponents: 16, maxFrameBytes: 96, maxAddressBytes: 32)
        var accepted = 0
        var acceptedWithLoneFrames = 0
        var rejected: [String: Int] = [:]
        for iteration in 0..<20000 {
            let frames = iteration.isMultiple(of: 4)
                ? randomFrames(&random)
                : mutate(seeds[Int(random.next() % UInt64(seeds.count))], &random)
            do {
                let message = try WireCodec.decode(frames, limits: limits)
                accepted += 1
                if frames.count > 1 { acceptedWithLoneFrames += 1 }
                XCTAssertEqual(rebuild(message, placedAs: frames), frames, "iteration \(iteration)")
                let placedAsTheEncoderWould = message.components.enumerated().allSatisfy { index, component in
                    guard case .data(let bytes) = component else { return true }
                    return (frames[0][22 + 5 * index] == 2) == (bytes.count >= WireCodec.ownFrameThreshold)
                }
                if placedAsTheEncoderWould {
                    XCTAssertEqual(WireCodec.encode(message), frames, "iteration \(iteration)")
                }
            } catch {
                rejected[Self.caseName(error), default: 0] += 1
            }
        }
        // Both paths were exercised, and every error but running out of frames, or the
        // test proves little.
        XCTAssertGreaterThan(accepted, 1000)
        XCTAssertGreaterThan(acceptedWithLoneFrames, 100)
        for error in ["headerTooShort", "badMagic", "unsupportedVersion", "unknownKind", "reservedFlags",
                      "tooManyComponents", "headerLengthMismatch", "frameCountMismatch", "unknownComponentKind",
                      "frameTooLarge", "componentLengthMismatch", "replyAddressInvalid", "addressInvalid"] {
            XCTAssertGreaterThan(rejected[error, default: 0], 0, "\(error) never happened: \(rejected)")
        }
    }

    private static func caseName(_ error: WireFormatError) -> String {
        switch error {
        case .noFrames: "noFrames"
        case .headerTooShort: "headerTooShort"
        case .badMagic: "badMagic"
        case .unsupportedVersion: "unsupportedVersion"
        case .unknownKind: "unknownKind"
        case .reservedFlags: "reservedFlags"
        case .headerLengthMismatch: "headerLengthMismatch"
        case .frameCountMismatch: "frameCountMismatch"
        case .unknownComponentKind: "unknownComponentKind"
        case .tooManyComponents: "tooManyComponents"
        case .frameTooLarge: "frameTooLarge"
        case .componentLengthMismatch: "componentLengthMismatch"
        case .replyAddressInvalid: "replyAddressInvalid"
        case .addressInvalid: "addressInvalid"
        case .descriptorLengthInvalid: "descriptorLengthInvalid"
        case .sharedLengthInvalid: "sharedLengthInvalid"
        case .descriptorsNotFound: "descriptorsNotFound"
        }
    }

    /// The frames of `message` built by hand, each data component inline or alone as the
    /// component table of `placement`'s message frame says.
    private func rebuild(_ message: WireMessage, placedAs placement: [[UInt8]]) -> [[UInt8]] {
        let parts = message.components.enumerated().map { index, component -> Part in
            switch component {
            case .port(let address): .port(address)
            case .data(let bytes): placement[0][22 + 5 * index] == 2 ? .alone(bytes) : .data(bytes)
            case .descriptor(let token, let index): .descriptor(token: token, index: index)
            case .sharedData(let token, let start, let length): .sharedData(token: token, start: start, length: length)
            }
        }
        return frames(kind: message.kind.rawValue, messageID: message.messageID, correlationID: message.correlationID,
                      replyPort: Array((message.replyAddress ?? "").utf8), parts)
    }

    private func randomFrames(_ random: inout SplitMix64) -> [[UInt8]] {
        (0..<Int(random.next() % 4)).map { index in
            let bytes = (0..<Int(random.next() % 40)).map { _ in UInt8(truncatingIfNeeded: random.next() % 4) }
            // A valid magic and version half the time, so that the random bytes reach the fields.
            return index == 0 && random.next() % 2 == 0 ? [0x52, 0x4C, 0x4B, 3] + bytes : bytes
        }
    }

    private func mutate(_ frames: [[UInt8]], _ random: inout SplitMix64) -> [[UInt8]] {
        var frames = frames
        for _ in 0..<Int(random.next() % 3) {
            let frameIndex = Int(random.next() % UInt64(frames.count + 1))
            switch random.next() % 8 {
            case 0 where frameIndex < frames.count && !frames[frameIndex].isEmpty:
                // Change a byte; favour small values, which hit real field values (kinds 0-3).
                let byteIndex = Int(random.next() % UInt64(frames[frameIndex].count))
                frames[frameIndex][byteIndex] = random.next() % 2 == 0
                    ? UInt8(truncatingIfNeeded: random.next()) : UInt8(random.next() % 4)
            case 1 where frameIndex < frames.count:
                frames[frameIndex].removeLast(Int(random.next() % UInt64(frames[frameIndex].count + 1)))
            case 2 where frameIndex < frames.count:
                frames[frameIndex].append(UInt8(truncatingIfNeeded: random.next()))
            case 3 where frameIndex < frames.count:
                frames.remove(at: frameIndex)
            case 4:
                frames.insert(Array("inproc://z".utf8), at: frameIndex)
            case 5 where !frames.isEmpty:
                // Move an inline data component into a frame of its own, or a lone one inline:
                // a valid message, placed differently.
                frames = moveOneComponent(frames, &random)
            case 6 where !frames.isEmpty && frames[0].count >= 22:
                // Change one table entry's kind (between 0 and 2) or length by one.
                let count = Int(frames[0][6]) | Int(frames[0][7]) << 8
                guard count > 0, frames[0].count >= 22 + 5 * count else { break }
                let entry = 22 + 5 * Int(random.next() % UInt64(count))
                if random.next() % 2 == 0 { frames[0][entry] ^= 2 } else { frames[0][entry + 1] &+= 1 }
            default:
                break // leave this round's frames alone: many mutants stay valid
            }
        }
        return frames
    }

    /// `frames` with one data component moved between the message frame and a frame of its
    /// own, if they decode; else `frames`.
    private func moveOneComponent(_ frames: [[UInt8]], _ random: inout SplitMix64) -> [[UInt8]] {
        let limits = WireLimits(maxComponents: 64, maxFrameBytes: 1 << 20, maxAddressBytes: 1024)
        guard let message = try? WireCodec.decode(frames, limits: limits) else { return frames }
        let data = message.components.indices.filter { if case .data = message.components[$0] { true } else { false } }
        guard let moved = data.randomElement(using: &random) else { return frames }
        let parts = message.components.enumerated().map { index, component -> Part in
            switch component {
            case .port(let address): return .port(address)
            case .descriptor(let token, let index): return .descriptor(token: token, index: index)
            case .sharedData(let token, let start, let length): return .sharedData(token: token, start: start, length: length)
            case .data(let bytes):
                let alone = frames[0][22 + 5 * index] == 2
                return alone != (index == moved) ? .alone(bytes) : .data(bytes)
            }
        }
        return self.frames(kind: message.kind.rawValue, messageID: message.messageID,
                           correlationID: message.correlationID,
                           replyPort: Array((message.replyAddress ?? "").utf8), parts)
    }
}

/// A small seeded generator (SplitMix64), so that a failure reproduces.
private struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
