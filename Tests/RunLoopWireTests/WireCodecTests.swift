@testable import RunLoopWire
import XCTest

final class WireCodecTests: XCTestCase {
    /// A header with the given fields, built byte by byte (independently of the encoder).
    private func header(
        magic: [UInt8] = [0x52, 0x4C, 0x4B],
        version: UInt8 = 2,
        kind: UInt8 = 0,
        flags: UInt8 = 0,
        count: UInt16? = nil,
        messageID: [UInt8] = [0, 0, 0, 0],
        correlationID: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0],
        componentKinds: [UInt8] = []
    ) -> [UInt8] {
        let count = count ?? UInt16(componentKinds.count)
        return magic + [version, kind, flags, UInt8(count & 0xFF), UInt8(count >> 8)]
            + messageID + correlationID + componentKinds
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

    private func assertRoundTrips(_ message: WireMessage, file: StaticString = #filePath, line: UInt = #line) {
        let frames = WireCodec.encode(message)
        XCTAssertEqual(frames.count, 2 + message.components.count, file: file, line: line)
        XCTAssertEqual(frames.first?.count, 20 + message.components.count, file: file, line: line)
        XCTAssertEqual(try WireCodec.decode(frames), message, file: file, line: line)
    }

    // MARK: - Round trips

    func testAMessageWithoutComponentsRoundTrips() {
        assertRoundTrips(WireMessage(messageID: 7))
    }

    func testDataAndPortComponentsRoundTripInOrder() {
        assertRoundTrips(WireMessage(
            messageID: -123_456,
            components: [
                .data([1, 2, 3]),
                .port(address: "inproc://rlk.3f2a"),
                .data([]),
                .port(address: "ipc:///run/user/0/runloopkit/naïve"),
                .data(Array(repeating: 0xAB, count: 70_000)),
                .port(address: "tcp://127.0.0.1:5555"),
            ]
        ))
    }

    func testEveryKindRoundTripsWithReplyAddressAndExtremeIDs() {
        for kind in [WireKind.message, .request, .reply] {
            assertRoundTrips(WireMessage(
                kind: kind,
                messageID: .min,
                correlationID: .max,
                replyAddress: "tcp://[::1]:6000",
                components: [.data([0])]
            ))
            assertRoundTrips(WireMessage(kind: kind, messageID: .max, correlationID: 1))
        }
    }

    func testTheEncoderWritesTheHeaderFieldsLittleEndian() {
        let frames = WireCodec.encode(WireMessage(
            kind: .request,
            messageID: 0x0102_0304,
            correlationID: 0x0A0B_0C0D_0E0F_1011,
            replyAddress: "inproc://r",
            components: [.port(address: "inproc://p"), .data([9])]
        ))
        XCTAssertEqual(frames, [
            [0x52, 0x4C, 0x4B, 2, 1, 0, 2, 0, 0x04, 0x03, 0x02, 0x01,
             0x11, 0x10, 0x0F, 0x0E, 0x0D, 0x0C, 0x0B, 0x0A, 1, 0],
            Array("inproc://r".utf8),
            Array("inproc://p".utf8),
            [9],
        ])
    }

    func testAnEmptyReplyAddressIsEncodedAsAnEmptyFrameAndDecodesAsNone() throws {
        let frames = WireCodec.encode(WireMessage(messageID: 1, replyAddress: ""))
        XCTAssertEqual(frames[1], [])
        XCTAssertNil(try WireCodec.decode(frames).replyAddress)
    }

    /// The worked example of `docs/wire-format.md`: a check-in message, id 100, carrying
    /// one port, without a reply address.
    func testTheDocumentedCheckInExampleDecodes() throws {
        let frames = [
            "52 4c 4b 02 00 00 01 00 64 00 00 00 00 00 00 00 00 00 00 00 01",
            "",
            "74 63 70 3a 2f 2f 31 32 37 2e 30 2e 30 2e 31 3a 35 35 35 36",
        ].map { hex in hex.split(separator: " ").map { UInt8($0, radix: 16)! } }
        let expected = WireMessage(messageID: 100, components: [.port(address: "tcp://127.0.0.1:5556")])
        XCTAssertEqual(try WireCodec.decode(frames), expected)
        XCTAssertEqual(WireCodec.encode(expected), frames)
    }

    /// The failure example of `docs/wire-format.md`, read from the document itself: what
    /// a port sends when the handler of request 9 (correlation id 0x1235) threw.
    func testTheDocumentedFailureExampleIsWhatTheEncoderWrites() throws {
        let document = try String(contentsOfFile: #filePath.replacingOccurrences(
            of: "Tests/RunLoopWireTests/WireCodecTests.swift", with: "docs/wire-format.md"), encoding: .utf8)
        let marker = "The failure's frame 0 in hex: `"
        let start = try XCTUnwrap(document.range(of: marker)?.upperBound, "the document shows the failure's header")
        let hex = document[start...].prefix { $0 != "`" }
        let header = hex.split(separator: " ").map { UInt8($0, radix: 16)! }
        let failure = WireMessage(kind: .failure, messageID: 9, correlationID: 0x1235,
                                  components: [.data(Array("job refused: fail".utf8))])
        XCTAssertEqual(WireCodec.encode(failure).first, header)
        XCTAssertEqual(try WireCodec.decode([header, [], Array("job refused: fail".utf8)]), failure)
    }

    // MARK: - One test per error

    func testNoFramesIsRejected() {
        assertDecodeThrows([], .noFrames)
    }

    func testAHeaderTooShortForTheVersionIsRejected() {
        assertDecodeThrows([[0x52, 0x4C, 0x4B], []], .headerTooShort(3))
        assertDecodeThrows([[], []], .headerTooShort(0))
    }

    func testAVersionTwoHeaderShorterThanTwentyBytesIsRejected() {
        assertDecodeThrows([Array(header().prefix(19)), []], .headerTooShort(19))
    }

    func testABadMagicIsRejected() {
        assertDecodeThrows([header(magic: [0x52, 0x4C, 0x4C]), []], .badMagic)
        assertDecodeThrows([[0, 0, 0, 0], []], .badMagic)
    }

    func testAnUnknownVersionIsRejectedWhateverTheHeaderLength() {
        assertDecodeThrows([header(version: 1), []], .unsupportedVersion(1)) // replies went to reply addresses then
        assertDecodeThrows([[0x52, 0x4C, 0x4B, 0], []], .unsupportedVersion(0))
    }

    func testAnUnknownKindIsRejected() {
        assertDecodeThrows([header(kind: 4), []], .unknownKind(4))
    }

    func testReservedFlagsAreRejected() {
        assertDecodeThrows([header(flags: 0x80), []], .reservedFlags(0x80))
    }

    func testAHeaderWhoseLengthDisagreesWithItsComponentCountIsRejected() {
        assertDecodeThrows([header(count: 2, componentKinds: [0]), [], [1]], .headerLengthMismatch(expected: 22, actual: 21))
        assertDecodeThrows([header(count: 0, componentKinds: [0]), []], .headerLengthMismatch(expected: 20, actual: 21))
    }

    func testAFrameCountThatDisagreesWithTheHeaderIsRejected() {
        assertDecodeThrows([header(componentKinds: [0, 1])], .frameCountMismatch(expected: 4, actual: 1))
        assertDecodeThrows([header(componentKinds: [0]), [], [1], [2]], .frameCountMismatch(expected: 3, actual: 4))
    }

    func testAnUnknownComponentKindIsRejected() {
        assertDecodeThrows([header(componentKinds: [0, 1, 2]), [], [], [], []], .unknownComponentKind(index: 2, kind: 2))
    }

    func testMoreComponentsThanTheLimitAreRejected() {
        let limits = WireLimits(maxComponents: 2)
        let frames = [header(componentKinds: [0, 0, 0]), [], [], [], []]
        assertDecodeThrows(frames, limits: limits, .tooManyComponents(3))
        assertDecodeThrows([header(count: 1025), []], .tooManyComponents(1025))
    }

    func testAFrameAfterTheHeaderLargerThanTheLimitIsRejected() {
        let limits = WireLimits(maxFrameBytes: 4)
        assertDecodeThrows([header(componentKinds: [0]), [], [1, 2, 3, 4, 5]], limits: limits, .frameTooLarge(index: 2, size: 5))
        XCTAssertNoThrow(try WireCodec.decode([header(componentKinds: [0]), [], [1, 2, 3, 4]], limits: limits))
    }

    func testInvalidAddressesAreRejectedWithTheirFrameIndex() {
        let port = Array("inproc://p".utf8)
        let invalid: [[UInt8]] = [
            [0xFF, 0xFE], // not UTF-8
            Array("inproc://".utf8) + [0xC3], // truncated UTF-8
            Array("udp://127.0.0.1:1".utf8), // unknown scheme
            Array("INPROC://p".utf8), // schemes are case-sensitive, as in libzmq
            Array("inproc://".utf8), // nothing after the scheme
            Array("inproc://a\0b".utf8), // a NUL would cut the endpoint libzmq sees
            Array("tcp://host:1\n".utf8), // control character
        ]
        for address in invalid {
            assertDecodeThrows([header(), address], .addressInvalid(index: 1))
            assertDecodeThrows([header(componentKinds: [0, 1]), port, address, address], .addressInvalid(index: 3))
        }
        // An empty port address is invalid; only the reply address may be empty.
        assertDecodeThrows([header(componentKinds: [1]), [], []], .addressInvalid(index: 2))
        // Too long: over maxAddressBytes.
        let long = Array("inproc://".utf8) + Array(repeating: UInt8(ascii: "x"), count: 1016)
        XCTAssertNoThrow(try WireCodec.decode([header(), Array(long.dropLast())]))
        assertDecodeThrows([header(), long], .addressInvalid(index: 1))
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
    }

    // MARK: - Robustness

    /// Decoding random and mutated frames never traps, and whatever it accepts re-encodes to
    /// exactly the frames it came from (so nothing in the frames is ignored or altered).
    func testDecodingRandomAndMutatedFramesNeverTrapsAndAcceptedFramesReencodeExactly() {
        var random = SplitMix64(seed: 0x524C_4B01)
        let seeds: [[[UInt8]]] = [
            WireCodec.encode(WireMessage(messageID: 100, components: [.port(address: "tcp://127.0.0.1:5556")])),
            WireCodec.encode(WireMessage(
                kind: .request, messageID: 5, correlationID: 9, replyAddress: "inproc://reply",
                components: [.data([1, 2]), .port(address: "ipc:///tmp/x"), .data([])]
            )),
            WireCodec.encode(WireMessage(kind: .reply, messageID: -1, correlationID: 3)),
        ]
        let limits = WireLimits(maxComponents: 16, maxFrameBytes: 64, maxAddressBytes: 32)
        var accepted = 0
        var rejected = 0
        for iteration in 0..<5000 {
            let frames = iteration.isMultiple(of: 4)
                ? randomFrames(&random)
                : mutate(seeds[Int(random.next() % UInt64(seeds.count))], &random)
            do {
                let message = try WireCodec.decode(frames, limits: limits)
                accepted += 1
                XCTAssertEqual(WireCodec.encode(message), frames, "iteration \(iteration)")
            } catch {
                rejected += 1
            }
        }
        // Both paths were exercised, or the test proves little.
        XCTAssertGreaterThan(accepted, 100)
        XCTAssertGreaterThan(rejected, 100)
    }

    private func randomFrames(_ random: inout SplitMix64) -> [[UInt8]] {
        (0..<Int(random.next() % 6)).map { _ in
            (0..<Int(random.next() % 28)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        }
    }

    private func mutate(_ frames: [[UInt8]], _ random: inout SplitMix64) -> [[UInt8]] {
        var frames = frames
        for _ in 0..<Int(random.next() % 3) {
            let frameIndex = Int(random.next() % UInt64(frames.count + 1))
            switch random.next() % 6 {
            case 0 where frameIndex < frames.count && !frames[frameIndex].isEmpty:
                // Flip a byte; in the header, favour small values that hit real field values.
                let byteIndex = Int(random.next() % UInt64(frames[frameIndex].count))
                frames[frameIndex][byteIndex] = random.next() % 2 == 0
                    ? UInt8(truncatingIfNeeded: random.next()) : UInt8(random.next() % 3)
            case 1 where frameIndex < frames.count:
                frames[frameIndex].removeLast(Int(random.next() % UInt64(frames[frameIndex].count + 1)))
            case 2 where frameIndex < frames.count:
                frames[frameIndex].append(UInt8(truncatingIfNeeded: random.next()))
            case 3 where frameIndex < frames.count:
                frames.remove(at: frameIndex)
            case 4:
                frames.insert(Array("inproc://z".utf8), at: frameIndex)
            default:
                break // leave this round's frames alone: many mutants stay valid
            }
        }
        return frames
    }
}

/// A small seeded generator (SplitMix64), so that a failure reproduces.
private struct SplitMix64 {
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
