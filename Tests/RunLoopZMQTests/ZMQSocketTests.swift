import CZeroMQ
import Foundation
import RunLoopSystem
import RunLoopTestSupport
@testable import RunLoopZMQ
import XCTest

final class ZMQSocketTests: XCTestCase {
    private func assertThrowsZMQError(
        _ expected: SystemCallError.Code,
        call: String,
        file: StaticString = #filePath,
        line: UInt = #line,
        _ body: () throws -> Void
    ) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: expected, call: call), file: file, line: line)
        }
    }

    // MARK: - Sending and receiving

    func testPushPullRoundTripDeliversAMultipartMessageWhole() throws {
        let (push, pull) = try makePushPull()
        let frames: [[UInt8]] = [[0x52, 0x4C, 0x4B], [], Array(repeating: 7, count: 100_000), [1]]
        XCTAssertTrue(try push.send(frames, dontWait: false))
        XCTAssertEqual(try pull.receive(dontWait: false), frames)
    }

    func testMessagesArriveInTheOrderTheyWereSent() throws {
        let (push, pull) = try makePushPull()
        for index in 0..<100 {
            XCTAssertTrue(try push.send([[UInt8(index)], [UInt8(index), 1]], dontWait: true))
        }
        for index in 0..<100 {
            XCTAssertEqual(try pull.receive(dontWait: false), [[UInt8(index)], [UInt8(index), 1]])
        }
    }

    func testSendFrameBuildsAMultipartMessageFromRawBuffers() throws {
        let (push, pull) = try makePushPull()
        let header: [UInt8] = [1, 2, 3]
        let body: [UInt8] = [4, 5]
        XCTAssertTrue(try header.withUnsafeBytes { try push.sendFrame($0, more: true, dontWait: true) })
        XCTAssertTrue(try body.withUnsafeBytes { try push.sendFrame($0, more: false, dontWait: false) })
        XCTAssertEqual(try pull.receive(dontWait: false), [header, body])
    }

    func testSendingAnEmptyListOfFramesThrowsInvalidArgument() throws {
        let (push, _) = try makePushPull()
        assertThrowsZMQError(.invalidArgument, call: "zmq_send") { _ = try push.send([], dontWait: true) }
    }

    func testReceiveWithDontWaitReturnsNilWhenNothingIsQueued() throws {
        let (_, pull) = try makePushPull()
        XCTAssertNil(try pull.receive(dontWait: true))
    }

    func testReceiveWithoutDontWaitThrowsAgainWhenTheReceiveTimeoutPasses() throws {
        let (_, pull) = try makePushPull()
        try pull.setOption(.receiveTimeout, 10)
        assertThrowsZMQError(.again, call: "zmq_msg_recv") { _ = try pull.receive(dontWait: false) }
    }

    func testNonBlockingSendsAndReceivesSeeWhatThePeerJustDid() throws {
        // libzmq's non-blocking sends look at the peer's progress only every millisecond or
        // so; without the ZMQ_EVENTS check after a send finds the queue full, some of these
        // sends would see it full although the peer has read. (A non-blocking receive reads
        // the socket's mailbox itself before it reports EAGAIN, so these receives must see
        // every message at once with no check of ours.)
        // Small high-water marks make the sender depend on fresh news of the receiver's reads.
        let endpoint = uniqueInprocEndpoint()
        let pull = try ZMQSocket(type: .pull)
        try pull.setOption(.receiveHighWaterMark, 1)
        try pull.bind(endpoint)
        let push = try ZMQSocket(type: .push)
        try push.setOption(.sendHighWaterMark, 1)
        try push.connect(endpoint)
        for index in 0..<2000 {
            let frames: [[UInt8]] = [[UInt8(truncatingIfNeeded: index)], [1, 2, 3]]
            let sent = try push.send(frames, dontWait: true)
            let received = try pull.receive(dontWait: true)
            guard sent, received == frames else {
                return XCTFail("message \(index): sent \(sent), received \(String(describing: received))")
            }
        }
    }

    func testSendWithDontWaitReturnsFalseWhenThereIsNoPeer() throws {
        let push = try ZMQSocket(type: .push)
        XCTAssertFalse(try push.send([[1], [2]], dontWait: true))
    }

    func testSendWithDontWaitReturnsFalseWhenTheHighWaterMarkIsReachedAndQueuesNothing() throws {
        // Connect before anyone binds: libzmq queues for the absent peer, up to the HWM.
        let endpoint = uniqueInprocEndpoint()
        let push = try ZMQSocket(type: .push)
        try push.setOption(.sendHighWaterMark, 1)
        try push.connect(endpoint)
        var queued = 0
        var refused = false
        while queued < 1000 {
            if try push.send([[UInt8(truncatingIfNeeded: queued)], [0xFF]], dontWait: true) {
                queued += 1
            } else {
                refused = true
                break
            }
        }
        XCTAssertTrue(refused, "1000 messages queued despite a high-water mark of 1")
        XCTAssertGreaterThanOrEqual(queued, 1)

        // The queued messages, and only they, reach the peer once it binds.
        let pull = try ZMQSocket(type: .pull)
        try pull.setOption(.receiveTimeout, 5000)
        try pull.bind(endpoint)
        for index in 0..<queued {
            XCTAssertEqual(try pull.receive(dontWait: false), [[UInt8(truncatingIfNeeded: index)], [0xFF]])
        }
        XCTAssertNil(try pull.receive(dontWait: true))
    }

    func testTooManyFramesThrowsAndTheSocketStillReceivesTheNextMessage() throws {
        let (push, pull) = try makePushPull()
        try push.send([[1], [2], [3], [4], [5]], dontWait: false)
        try push.send([[6], [7], [8]], dontWait: false)
        try push.send([[9], [10]], dontWait: false)
        assertThrowsZMQError(.tooManyFrames, call: "zmq_msg_recv") { _ = try pull.receive(dontWait: false, maxFrames: 3) }
        XCTAssertEqual(try pull.receive(dontWait: false, maxFrames: 3), [[6], [7], [8]])
        XCTAssertEqual(try pull.receive(dontWait: false, maxFrames: 3), [[9], [10]])
        XCTAssertNil(try pull.receive(dontWait: true))
    }

    func testFramesAreLentInPlaceAndLongerMessagesGrowTheSlotsWithoutLosingFrames() throws {
        let (push, pull) = try makePushPull()
        let long: [[UInt8]] = (0..<50).map { index in Array(repeating: UInt8(index), count: index * 10) }
        let messages: [[[UInt8]]] = [[[1], [2]], long, [[3]], long.reversed()]
        for frames in messages {
            try push.send(frames, dontWait: false)
            let lent = try pull.receive(dontWait: false) { views in views.map { [UInt8]($0) } }
            XCTAssertEqual(lent, frames)
        }
    }

    func testTooManyFramesErrorHasItsOwnDescription() {
        XCTAssertEqual(
            SystemCallError(code: .tooManyFrames, call: "zmq_msg_recv").description,
            "zmq_msg_recv failed: message has too many frames (code -1)"
        )
    }

    // MARK: - Readiness

    func testEventsReportPollInAfterAMessageIsSentAndNotAfterItIsReceived() throws {
        let (push, pull) = try makePushPull()
        XCTAssertFalse(try pull.events.contains(.pollIn))
        try push.send([[42]], dontWait: false)
        XCTAssertTrue(try pull.events.contains(.pollIn))
        _ = try pull.receive(dontWait: true)
        XCTAssertFalse(try pull.events.contains(.pollIn))
        XCTAssertTrue(try push.events.contains(.pollOut))
    }

    func testFileDescriptorIsAnOpenDescriptor() throws {
        let (_, pull) = try makePushPull()
        let fd = try pull.fileDescriptor
        XCTAssertGreaterThanOrEqual(fd, 0)
        XCTAssertNotEqual(fcntl(fd, F_GETFD), -1)
    }

    func testPollTimesOutOnAnEmptySocketAndNotEarly() throws {
        let (_, pull) = try makePushPull()
        let start = ContinuousClock.now
        XCTAssertEqual(try pull.poll(for: .pollIn, timeout: .milliseconds(20)), [])
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(20))
    }

    func testPollReturnsPollInWhenAMessageIsQueued() throws {
        let (push, pull) = try makePushPull()
        try push.send([[1]], dontWait: false)
        XCTAssertEqual(try pull.poll(for: .pollIn, timeout: .seconds(5)), .pollIn)
        XCTAssertEqual(try pull.poll(for: .pollIn, timeout: nil), .pollIn)
    }

    // MARK: - Endpoints

    func testBindingAnUnknownTransportThrowsProtocolNotSupported() throws {
        let socket = try ZMQSocket(type: .pull)
        assertThrowsZMQError(.protocolNotSupported, call: "zmq_bind") { try socket.bind("bogus://x") }
        assertThrowsZMQError(.protocolNotSupported, call: "zmq_connect") { try socket.connect("bogus://x") }
    }

    func testBindingAMalformedTCPEndpointThrowsInvalidArgument() throws {
        let socket = try ZMQSocket(type: .pull)
        assertThrowsZMQError(.invalidArgument, call: "zmq_bind") { try socket.bind("tcp://127.0.0.1:abc") }
        assertThrowsZMQError(.invalidArgument, call: "zmq_bind") { try socket.bind("tcp://nohost") }
        assertThrowsZMQError(.invalidArgument, call: "zmq_bind") { try socket.bind("garbage") }
        assertThrowsZMQError(.invalidArgument, call: "zmq_connect") { try socket.connect("tcp://127.0.0.1:*") }
    }

    func testBindingATCPEndpointWithAnInvalidAddressThrowsNoSuchDevice() throws {
        // libzmq takes a host it cannot parse as an IP address for an interface name.
        let socket = try ZMQSocket(type: .pull)
        assertThrowsZMQError(.noSuchDevice, call: "zmq_bind") { try socket.bind("tcp://999.0.0.1:5555") }
    }

    func testBindingAnAddressThatIsNotLocalThrowsAddressNotAvailable() throws {
        let socket = try ZMQSocket(type: .pull)
        assertThrowsZMQError(.addressNotAvailable, call: "zmq_bind") { try socket.bind("tcp://192.0.2.1:5555") }
    }

    func testBindingAnEndpointTwiceThrowsAddressInUse() throws {
        let endpoint = uniqueInprocEndpoint()
        let first = try ZMQSocket(type: .pull)
        try first.bind(endpoint)
        let second = try ZMQSocket(type: .pull)
        assertThrowsZMQError(.addressInUse, call: "zmq_bind") { try second.bind(endpoint) }
    }

    func testBindingAnIPCPathInAMissingDirectoryThrowsFileNotFound() throws {
        let socket = try ZMQSocket(type: .pull)
        assertThrowsZMQError(.fileNotFound, call: "zmq_bind") {
            try socket.bind("ipc:///nonexistent-\(UUID().uuidString)/socket")
        }
    }

    func testUnbindingOrDisconnectingAnUnknownEndpointThrowsFileNotFound() throws {
        let socket = try ZMQSocket(type: .pull)
        assertThrowsZMQError(.fileNotFound, call: "zmq_unbind") { try socket.unbind(uniqueInprocEndpoint()) }
        assertThrowsZMQError(.fileNotFound, call: "zmq_disconnect") { try socket.disconnect(uniqueInprocEndpoint()) }
    }

    func testAnEndpointWithANULByteIsRejectedRatherThanCut() throws {
        let endpoint = uniqueInprocEndpoint()
        let socket = try ZMQSocket(type: .pull)
        assertThrowsZMQError(.invalidArgument, call: "zmq_bind") { try socket.bind(endpoint + "\0suffix") }
        try socket.bind(endpoint) // the prefix alone was not bound
    }

    func testUnbindFreesTheEndpointForAnotherSocket() throws {
        let endpoint = uniqueInprocEndpoint()
        let first = try ZMQSocket(type: .pull)
        try first.bind(endpoint)
        try first.unbind(endpoint)
        let second = try ZMQSocket(type: .pull)
        try second.bind(endpoint)
    }

    func testLastEndpointNamesThePortChosenForAWildcardTCPBind() throws {
        let pull = try ZMQSocket(type: .pull)
        try pull.setOption(.receiveTimeout, 5000)
        XCTAssertEqual(try pull.lastEndpoint, "")
        try pull.bind("tcp://127.0.0.1:*")
        let endpoint = try pull.lastEndpoint
        XCTAssertTrue(endpoint.hasPrefix("tcp://127.0.0.1:"), endpoint)
        let port = Int(endpoint.dropFirst("tcp://127.0.0.1:".count))
        XCTAssertNotNil(port)
        XCTAssertNotEqual(port, 0)

        let push = try ZMQSocket(type: .push)
        try push.connect(endpoint)
        try push.send([[1, 2], [3]], dontWait: false)
        XCTAssertEqual(try pull.receive(dontWait: false), [[1, 2], [3]])
    }

    // MARK: - Options

    func testNewSocketsLingerForTheirContextsSocketLinger() throws {
        let context = try ZMQContext(socketLinger: .microseconds(1500))
        XCTAssertEqual(context.socketLinger, 2)
        let socket = try ZMQSocket(context: context, type: .push)
        XCTAssertEqual(try socket.option(.linger), 2)
        XCTAssertEqual(try ZMQSocket(type: .push).option(.linger), 100)
    }

    func testDurationsBecomeWholeMillisecondsRoundedUpAndNeverNegative() {
        XCTAssertEqual(Duration.zero.zmqMilliseconds, 0)
        XCTAssertEqual(Duration.nanoseconds(1).zmqMilliseconds, 1)
        XCTAssertEqual(Duration.milliseconds(20).zmqMilliseconds, 20)
        XCTAssertEqual(Duration.microseconds(20_001).zmqMilliseconds, 21)
        XCTAssertEqual(Duration.milliseconds(-5).zmqMilliseconds, 0)
        XCTAssertEqual(Duration.seconds(Int64.max).zmqMilliseconds, Int64.max / 1_000_000 + 1)
        XCTAssertEqual(try ZMQContext(socketLinger: .seconds(Int64.max)).socketLinger, Int32.max)
    }

    func testOptionsReadBackWhatWasSet() throws {
        let socket = try ZMQSocket(type: .pull)
        try socket.setOption(.linger, 0)
        try socket.setOption(.sendHighWaterMark, 7)
        try socket.setOption(.receiveHighWaterMark, 9)
        try socket.setOption(.sendTimeout, 11)
        try socket.setOption(.receiveTimeout, 13)
        try socket.setOption(.maxMessageSize, 1 << 40)
        try socket.setOption(.immediate, true)
        XCTAssertEqual(try socket.option(.linger), 0)
        XCTAssertEqual(try socket.option(.sendHighWaterMark), 7)
        XCTAssertEqual(try socket.option(.receiveHighWaterMark), 9)
        XCTAssertEqual(try socket.option(.sendTimeout), 11)
        XCTAssertEqual(try socket.option(.receiveTimeout), 13)
        XCTAssertEqual(try socket.option(.maxMessageSize), 1 << 40)
        XCTAssertEqual(try socket.option(.immediate), true)
    }

    func testAnInvalidOptionValueThrowsInvalidArgument() throws {
        let socket = try ZMQSocket(type: .pull)
        assertThrowsZMQError(.invalidArgument, call: "zmq_setsockopt") { try socket.setOption(.linger, -5) }
    }

    // MARK: - CURVE

    func testCurveKeyPairGenerationGivesFortyCharacterZ85Keys() throws {
        guard ZMQCurve.isAvailable else {
            return XCTFail("libzmq was built without CURVE, which ports promise: install Debian's libzmq3-dev")
        }
        let (publicKey, secretKey) = try ZMQCurve.generateKeyPair()
        XCTAssertEqual(publicKey.z85.utf8.count, 40)
        XCTAssertEqual(secretKey.z85.utf8.count, 40)
        XCTAssertEqual(publicKey.bytes.count, 32)
        XCTAssertNotEqual(publicKey, secretKey)
        XCTAssertEqual(ZMQCurveKey(z85: publicKey.z85), publicKey)
        XCTAssertNotEqual(try ZMQCurve.generateKeyPair().publicKey, publicKey)
    }

    func testCurveKeysRejectTextThatIsNotFortyZ85Characters() {
        XCTAssertNil(ZMQCurveKey(z85: "short"))
        XCTAssertNil(ZMQCurveKey(z85: String(repeating: "~", count: 39) + "\"")) // '"' is not Z85
        XCTAssertNil(ZMQCurveKey(bytes: [1, 2, 3]))
    }

    func testCurveEncryptedMessagesReachAServerThatKnowsNoClientKeys() throws {
        guard ZMQCurve.isAvailable else {
            return XCTFail("libzmq was built without CURVE, which ports promise: install Debian's libzmq3-dev")
        }
        let server = try ZMQCurve.generateKeyPair()
        let client = try ZMQCurve.generateKeyPair()

        let pull = try ZMQSocket(type: .pull)
        try pull.setOption(.curveServer, true)
        try pull.setOption(.curveSecretKey, server.secretKey)
        try pull.setOption(.receiveTimeout, 5000)
        try pull.bind("tcp://127.0.0.1:*")
        XCTAssertEqual(try pull.option(.curveServer), true)
        XCTAssertEqual(try pull.option(.curveSecretKey), server.secretKey)

        let push = try ZMQSocket(type: .push)
        try push.setOption(.curveServerKey, server.publicKey)
        try push.setOption(.curvePublicKey, client.publicKey)
        try push.setOption(.curveSecretKey, client.secretKey)
        try push.connect(try pull.lastEndpoint)
        try push.send([[1, 2, 3], [4]], dontWait: false)
        XCTAssertEqual(try pull.receive(dontWait: false), [[1, 2, 3], [4]])
    }

    // MARK: - Contexts and the library

    func testTheSharedContextHasRoomForThousandsOfSockets() {
        XCTAssertEqual(try ZMQContext.shared.maxSockets, 65536)
    }

    func testAContextWithUnsentMessagesTerminatesWithinItsLinger() throws {
        // The default linger, the bound docs/reliability.md promises (100 ms).
        var context: ZMQContext? = try ZMQContext()
        let linger = Duration.milliseconds(Int64(context!.socketLinger))
        XCTAssertEqual(linger, .milliseconds(100))
        do {
            let push = try ZMQSocket(context: context!, type: .push)
            // Nothing listens on port 1, so the message waits in the queue for good.
            try push.connect("tcp://127.0.0.1:1")
            XCTAssertTrue(try push.send([[1]], dontWait: true))
        }
        let start = ContinuousClock.now
        context = nil // zmq_ctx_term: would wait forever with an infinite linger
        let took = ContinuousClock.now - start
        print("a context with an unsent message closed in \(took) (linger \(linger))")
        XCTAssertGreaterThanOrEqual(took, linger - .milliseconds(5), "the message was pending: the linger ran out")
        // The margin covers scheduling on two busy CPUs under the sanitizers.
        XCTAssertLessThan(took, linger + .milliseconds(100), "closed within its linger")
    }

    func testShutdownMakesBlockingReceivesThrowTerminated() throws {
        let context = try ZMQContext()
        let pull = try ZMQSocket(context: context, type: .pull)
        try pull.bind(uniqueInprocEndpoint())
        try context.shutdown()
        assertThrowsZMQError(.terminated, call: "zmq_msg_recv") { _ = try pull.receive(dontWait: false) }
    }

    func testErrorDescriptionsNameTheCallAndLibzmqsMessage() {
        XCTAssertEqual(
            SystemCallError(code: .protocolNotSupported, call: "zmq_bind").description,
            "zmq_bind failed: Protocol not supported (errno \(EPROTONOSUPPORT))"
        )
        XCTAssertEqual(SystemCallError.Code.terminated.description, "Context was terminated")
    }

    func testLibzmqsOwnCodesHaveLibzmqsNumbersAndMessages() {
        let codes: [(SystemCallError.Code, Int32)] = [
            (.wrongState, EFSM), (.incompatibleProtocol, ENOCOMPATPROTO), (.terminated, ETERM), (.noIOThread, EMTHREAD),
        ]
        for (code, libzmqCode) in codes {
            XCTAssertEqual(code.rawValue, libzmqCode)
            XCTAssertEqual(code.description, String(cString: zmq_strerror(libzmqCode)))
        }
    }

    func testVersionAndCapabilitiesComeFromTheLoadedLibzmq() {
        XCTAssertGreaterThanOrEqual(ZMQ.version, ZMQ.Version(major: 4, minor: 3, patch: 0))
        XCTAssertTrue(ZMQ.has("ipc"))
        XCTAssertFalse(ZMQ.has("no-such-capability"))
    }
}
