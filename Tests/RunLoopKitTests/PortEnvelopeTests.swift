@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopWire
import XCTest

/// The zero-copy paths of a port message: sent from where its bytes are, decoded from
/// where libzmq put them. Both must agree with `WireCodec`'s model byte for byte.
final class PortEnvelopeTests: XCTestCase {
    private func port(_ address: String) -> RemotePort {
        RemotePort(PortAddress(unchecked: address))
    }

    private var envelopes: [PortEnvelope] {
        [
            PortEnvelope(.message, LoopMessage(id: 0)),
            PortEnvelope(.message, LoopMessage(id: -7, components: [.data([])])),
            PortEnvelope(.message, LoopMessage(id: 1, components: [.data(Array(repeating: 9, count: 64))])),
            PortEnvelope(.request, LoopMessage(id: 3, components: [.data(Array(repeating: 4, count: 70_000))]),
                         correlationID: 7),
            PortEnvelope(.message, LoopMessage(id: 2, components: [.data([8])], replyPort: port("inproc://back"))),
            PortEnvelope(.request, LoopMessage(id: Int32.max, components: [.data([1, 2]), .port(port("ipc:///tmp/x")),
                                                                            .data(Array(repeating: 3, count: 100_000))],
                                               replyPort: port("inproc://reply")), correlationID: .max),
            PortEnvelope(.reply, LoopMessage(id: 5, components: (0..<40).map { .data([UInt8($0)]) }), correlationID: 42),
        ]
    }

    func testSendingAnEnvelopeWritesExactlyTheFramesOfWireCodecEncode() throws {
        let (push, pull) = try makePushPull()
        for envelope in envelopes {
            XCTAssertTrue(try push.send(envelope.message, as: envelope.kind, correlationID: envelope.correlationID, dontWait: false))
            XCTAssertEqual(try pull.receive(dontWait: false), WireCodec.encode(envelope.wireMessage))
        }
    }

    func testSendingBytesWritesTheFramesOfTheOneComponentMessageThatHoldsThem() throws {
        let (push, pull) = try makePushPull()
        for (kind, bytes, correlationID) in [(WireKind.message, [UInt8](), UInt64(0)), (.request, [1, 2, 3], 9),
                                             (.reply, Array(repeating: 5, count: 70_000), .max)] {
            let sent = bytes.withUnsafeBytes { buffer in
                Result { () throws(SystemCallError) in
                    try push.send(id: 77, data: buffer, as: kind, correlationID: correlationID, dontWait: false)
                }
            }
            XCTAssertTrue(try sent.get())
            let expected = LoopMessage(id: 77, components: [.data(bytes)]).wire(kind: kind, correlationID: correlationID)
            XCTAssertEqual(try pull.receive(dontWait: false), WireCodec.encode(expected))
        }
    }

    func testDecodingFramesWhereTheSocketPutThemGivesBackTheEnvelopeSent() throws {
        let (push, pull) = try makePushPull()
        var replyAddresses = ReplyAddressCache()
        var storage = ReceivedMessageStorage()
        // Twice over, so the second round's reply address comes from the cache.
        for envelope in envelopes + envelopes {
            XCTAssertTrue(try push.send(envelope.message, as: envelope.kind, correlationID: envelope.correlationID, dontWait: true))
            let decoded = try pull.receive(dontWait: false) { frames in
                Result { () throws(WireFormatError) in
                    try PortEnvelope.decode(frames: frames, limits: .default, replyAddresses: &replyAddresses,
                                            storage: &storage)
                }
            }
            XCTAssertEqual(try decoded?.get(), envelope)
        }
    }

    func testAMalformedMessageFromTheSocketIsReportedLikeTheModelReportsIt() throws {
        let (push, pull) = try makePushPull()
        let frames = WireCodec.encode(WireMessage(messageID: 1, replyAddress: "inproc://ok",
                                                  components: [.data([1]), .port(address: "nope://x")]))
        XCTAssertTrue(try push.send(frames, dontWait: false))
        var replyAddresses = ReplyAddressCache()
        var storage = ReceivedMessageStorage()
        let decoded = try pull.receive(dontWait: false) { frames in
            Result { () throws(WireFormatError) in
                try PortEnvelope.decode(frames: frames, limits: .default, replyAddresses: &replyAddresses, storage: &storage)
            }
        }
        XCTAssertThrowsError(try decoded?.get()) { XCTAssertEqual($0 as? WireFormatError, .addressInvalid(component: 1)) }
        XCTAssertThrowsError(try WireCodec.decode(frames)) { XCTAssertEqual($0 as? WireFormatError, .addressInvalid(component: 1)) }
    }
}
