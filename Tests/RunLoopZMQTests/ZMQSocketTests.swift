import CFramePool
import CZeroMQ
import Dispatch
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

    // MARK: - Frames filled in place (the frame pool)

    /// A frame's bytes, distinct for each size and seed.
    private func pattern(_ size: Int, seed: Int = 0) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ size &+ seed &* 7) }
    }

    /// Sends `bytes` with `sendFrame(byteCount:more:dontWait:_:)`, filling the buffer it lends.
    @discardableResult
    private func sendFilled(_ socket: ZMQSocket, _ bytes: [UInt8], more: Bool = false, dontWait: Bool = false) throws -> Bool {
        try socket.sendFrame(byteCount: bytes.count, more: more, dontWait: dontWait) { buffer in
            precondition(buffer.count == bytes.count, "lent \(buffer.count) bytes for \(bytes.count)")
            buffer.copyBytes(from: bytes)
        }
    }

    private let poolClasses = 0..<Int32(RLK_FRAME_POOL_CLASSES)

    /// The slots of each class `socket`'s pool has allocated, and how many are free in it now.
    private func poolCounts(_ socket: ZMQSocket) throws -> (allocated: [Int], free: [Int]) {
        let pool = try XCTUnwrap(socket.framePool, "the socket has a frame pool")
        return (poolClasses.map { rlk_frame_pool_allocated(pool, $0) }, poolClasses.map { rlk_frame_pool_free(pool, $0) })
    }

    /// The frame pools and slots not yet freed in the process.
    private struct LiveFramePools: Equatable {
        var pools: Int
        var slots: Int
    }

    private func liveFramePools() -> LiveFramePools {
        LiveFramePools(pools: rlk_frame_pool_live_pools(), slots: rlk_frame_pool_live_slots())
    }

    /// Runs `body` with a context of its own, and returns once the context is terminated:
    /// every socket closed and libzmq's threads done, so every message it held is closed.
    private func withOwnContext(linger: Duration = .milliseconds(100), _ body: (ZMQContext) throws -> Void) throws {
        try body(try ZMQContext(socketLinger: linger))
    }

    /// A bound PULL (5 s receive timeout) and a PUSH connected to it over `transport`.
    private func pushPull(over transport: String, in context: ZMQContext) throws -> (push: ZMQSocket, pull: ZMQSocket) {
        let pull = try ZMQSocket(context: context, type: .pull)
        try pull.setOption(.receiveTimeout, 5000)
        switch transport {
        case "inproc": try pull.bind(uniqueInprocEndpoint())
        case "ipc": try pull.bind("ipc://\(NSTemporaryDirectory())rlk-pool-\(UUID().uuidString)")
        default: try pull.bind("tcp://127.0.0.1:*")
        }
        let push = try ZMQSocket(context: context, type: .push)
        try push.connect(try pull.lastEndpoint)
        return (push, pull)
    }

    func testFramesFilledInPlaceArriveByteExactOverInprocIPCAndTCPAtEverySize() throws {
        let sizes = [1, 33, 34, 80, 81, 100, 256, 1000, 5000, 70_000, 200_000]
        let before = liveFramePools()
        for transport in ["inproc", "ipc", "tcp"] {
            try withOwnContext { context in
                let (push, pull) = try pushPull(over: transport, in: context)
                for size in sizes {
                    XCTAssertTrue(try sendFilled(push, pattern(size)))
                    XCTAssertEqual(try pull.receive(dontWait: false), [pattern(size)], "\(transport), \(size) bytes")
                    if size <= ZMQSocket.largestFastBinFrameSize {
                        XCTAssertNil(push.framePool, "\(size) bytes went from the stack or libzmq's allocation, not a pool")
                    }
                }
                for (index, size) in sizes.enumerated() {
                    XCTAssertTrue(try sendFilled(push, pattern(size, seed: 1), more: index < sizes.count - 1))
                }
                XCTAssertEqual(try pull.receive(dontWait: false), sizes.map { pattern($0, seed: 1) }, "\(transport), one message")

                let (allocated, free) = try poolCounts(push)
                if transport == "inproc" {
                    // Each frame was closed by the receive, on this thread: one slot per class
                    // used by the single frames (1,000 bytes in 1 KiB, 5,000 in 16 KiB), three
                    // of 256 B for the multipart message's 81, 100 and 256 bytes; 34 and 80
                    // bytes (a fast bin's), 70,000 and 200,000 went from libzmq's allocation.
                    XCTAssertEqual(allocated, [3, 1, 0, 1, 0])
                    XCTAssertEqual(free, allocated)
                } else {
                    // libzmq's I/O thread closes the frames when it has written them, so a
                    // frame may still be out when the next takes a slot.
                    XCTAssertEqual(allocated.map { $0 > 0 }, [true, true, false, true, false],
                                   "\(transport): \(allocated); 70,000 and 200,000 bytes fell back")
                }
            }
            XCTAssertEqual(liveFramePools(), before, "\(transport): every pool and slot freed with the sockets")
        }
    }

    func testPooledBuffersComeBackSoSteadySendsAllocateNoNewSlot() throws {
        let before = liveFramePools()
        try withOwnContext { context in
            let (push, pull) = try pushPull(over: "inproc", in: context)
            // Windows of 50 frames of 85 bytes in flight, read after each window. The
            // receiver keeps its last frame (a small one) in its slot until its next
            // receive, so the second window takes one slot more; no window after it does.
            for round in 0..<200 {
                for index in 0..<50 { XCTAssertTrue(try sendFilled(push, pattern(85, seed: round * 50 + index))) }
                for index in 0..<50 {
                    guard try pull.receive(dontWait: false) == [pattern(85, seed: round * 50 + index)] else {
                        return XCTFail("round \(round), frame \(index) differs")
                    }
                }
                let (allocated, free) = try poolCounts(push)
                let slots = round == 0 ? 50 : 51
                guard allocated == [slots, 0, 0, 0, 0], free == [slots - 1, 0, 0, 0, 0] else {
                    return XCTFail("round \(round): allocated \(allocated), free \(free)")
                }
            }
            XCTAssertEqual(liveFramePools(), LiveFramePools(pools: before.pools + 1, slots: before.slots + 51))
        }
        XCTAssertEqual(liveFramePools(), before, "the kept frame went back as its socket closed")
    }

    func testAReceiveGivesALargeFrameBackAtOnceAndKeepsASmallOneUntilTheNext() throws {
        try withOwnContext { context in
            let (push, pull) = try pushPull(over: "inproc", in: context)
            func outstanding() throws -> Int {
                let (allocated, free) = try poolCounts(push)
                return zip(allocated, free).map { $0 - $1 }.reduce(0, +)
            }
            // 5,000 bytes: a pooled buffer above what a slot keeps.
            XCTAssertTrue(try sendFilled(push, pattern(5_000, seed: 1)))
            XCTAssertEqual(try pull.receive(dontWait: false), [pattern(5_000, seed: 1)])
            XCTAssertEqual(try outstanding(), 0, "a large frame goes back as its receive ends")
            // 500 bytes: a pooled buffer small enough to stay in its slot.
            XCTAssertTrue(try sendFilled(push, pattern(500, seed: 2)))
            XCTAssertEqual(try pull.receive(dontWait: false), [pattern(500, seed: 2)])
            XCTAssertEqual(try outstanding(), 1, "a small frame stays in its slot")
            // 40 bytes, from libzmq's own allocation: receiving it into the slot closes the kept one.
            XCTAssertTrue(try sendFilled(push, pattern(40, seed: 3)))
            XCTAssertEqual(try pull.receive(dontWait: false), [pattern(40, seed: 3)])
            XCTAssertEqual(try outstanding(), 0, "the next receive closed the kept frame")
        }
    }

    func testAMessageOverMaxFramesGivesBackTheLargeFrameItDiscarded() throws {
        try withOwnContext { context in
            let (push, pull) = try pushPull(over: "inproc", in: context)
            // Two small frames, then 5,000 bytes from the pool, which a receive of at most
            // two frames discards into its last slot.
            XCTAssertTrue(try sendFilled(push, pattern(10, seed: 1), more: true))
            XCTAssertTrue(try sendFilled(push, pattern(10, seed: 2), more: true))
            XCTAssertTrue(try sendFilled(push, pattern(5_000, seed: 3)))
            assertThrowsZMQError(.tooManyFrames, call: "zmq_msg_recv") { _ = try pull.receive(dontWait: false, maxFrames: 2) }
            let (allocated, free) = try poolCounts(push)
            XCTAssertEqual(free, allocated, "the discarded large frame went back with the failed receive")
        }
    }

    func testAFrameThatIsNotQueuedIsReleasedAndItsBufferGoesBackToThePool() throws {
        let before = liveFramePools()
        try withOwnContext { context in
            let push = try ZMQSocket(context: context, type: .push) // no peer: nothing can be queued
            for size in [10, 100, 2000, 100_000] {
                XCTAssertFalse(try sendFilled(push, pattern(size), dontWait: true), "\(size) bytes")
            }
            XCTAssertFalse(try sendFilled(push, pattern(100), dontWait: true))
            let (allocated, free) = try poolCounts(push)
            XCTAssertEqual(allocated, [1, 0, 1, 0, 0], "100 and 2,000 bytes from the pool, 10 from the stack")
            XCTAssertEqual(free, allocated, "nothing was queued, so every buffer came back")

            let pull = try ZMQSocket(context: context, type: .pull) // cannot send: zmq_msg_send fails
            XCTAssertThrowsError(try sendFilled(pull, pattern(100))) { error in
                XCTAssertEqual(error as? SystemCallError, SystemCallError(code: .notSupported, call: "zmq_msg_send"))
            }
            XCTAssertThrowsError(try sendFilled(pull, pattern(100_000)))
            XCTAssertEqual(try poolCounts(pull).allocated, [1, 0, 0, 0, 0])
            XCTAssertEqual(try poolCounts(pull).free, [1, 0, 0, 0, 0])
        }
        XCTAssertEqual(liveFramePools(), before)
    }

    func testAFrameWhoseClassIsAtItsBoundFallsBackToLibzmqsAllocationAndStillArrives() throws {
        let limit = rlk_frame_pool_class_limit(4)
        try withOwnContext { context in
            let (push, pull) = try pushPull(over: "inproc", in: context)
            for index in 0..<(limit + 16) { XCTAssertTrue(try sendFilled(push, pattern(40_000, seed: index))) }
            XCTAssertEqual(try poolCounts(push).allocated, [0, 0, 0, 0, limit], "16 frames fell back")
            XCTAssertEqual(try poolCounts(push).free, [0, 0, 0, 0, 0])
            for index in 0..<(limit + 16) {
                XCTAssertEqual(try pull.receive(dontWait: false), [pattern(40_000, seed: index)], "frame \(index)")
            }
            XCTAssertEqual(try poolCounts(push).free, [0, 0, 0, 0, limit], "all back")
        }
    }

    func testFramesQueuedUnreadWhenTheSenderClosesStillArriveIntactAndThenEverythingIsFreed() throws {
        let sizes = [34, 100, 1000, 5000, 40_000]
        let count = 200
        let before = liveFramePools()
        for transport in ["inproc", "ipc", "tcp"] {
            // A long linger, so that ipc and tcp keep sending after the close.
            try withOwnContext(linger: .seconds(10)) { context in
                let (push, pull) = try pushPull(over: transport, in: context)
                for index in 0..<count { XCTAssertTrue(try sendFilled(push, pattern(sizes[index % sizes.count], seed: index))) }
                push.close() // retires the pool with its frames still queued
                XCTAssertNil(push.framePool)
                if transport == "inproc" {
                    let pooled = (0..<count).filter { sizes[$0 % sizes.count] > ZMQSocket.largestFastBinFrameSize }.count
                    XCTAssertEqual(liveFramePools(), LiveFramePools(pools: before.pools + 1, slots: before.slots + pooled),
                                   "all still in the pipe")
                }
                for index in 0..<count {
                    guard try pull.receive(dontWait: false) == [pattern(sizes[index % sizes.count], seed: index)] else {
                        return XCTFail("\(transport): frame \(index) differs")
                    }
                }
                if transport == "inproc" {
                    XCTAssertEqual(liveFramePools(), before, "the last receive freed the retired pool")
                }
            }
            XCTAssertEqual(liveFramePools(), before, "\(transport): everything freed once libzmq closed the frames")
        }
    }

    func testReceiversClosingFramesOnTheirThreadsWhileTheOwnerSendsLoseNoBuffer() throws {
        let messages = runningUnderSanitizer ? 20_000 : 100_000
        let before = liveFramePools()
        try withOwnContext { context in
            let endpoint = uniqueInprocEndpoint()
            let push = try ZMQSocket(context: context, type: .push)
            try push.bind(endpoint)
            let receivers = try StampedFrameReceivers(count: 4, connectingTo: endpoint, in: context, expecting: messages)
            defer { receivers.stop() }
            for sequence in 0..<messages { try StampedFrameReceivers.send(sequence, from: push) }
            receivers.waitForAll()
            XCTAssertEqual(receivers.mismatches, 0)
            let (allocated, free) = try poolCounts(push)
            XCTAssertEqual(free, allocated, "every frame was closed, so every buffer came back")
            for index in poolClasses where allocated[Int(index)] > rlk_frame_pool_class_limit(index) {
                XCTFail("class \(index): \(allocated[Int(index)]) slots, over the bound")
            }
            print("\(messages) frames to 4 receiving threads; slots allocated per class: \(allocated)")
        }
        XCTAssertEqual(liveFramePools(), before)
    }

    func testClosingTheSenderWhileReceiversStillCloseItsFramesOnTheirThreadsFreesEverything() throws {
        let messages = runningUnderSanitizer ? 4_000 : 20_000
        let before = liveFramePools()
        for round in 0..<(runningUnderSanitizer ? 3 : 5) {
            try withOwnContext { context in
                let endpoint = uniqueInprocEndpoint()
                let push = try ZMQSocket(context: context, type: .push)
                try push.bind(endpoint)
                let receivers = try StampedFrameReceivers(count: 3, connectingTo: endpoint, in: context, expecting: messages)
                defer { receivers.stop() }
                for sequence in 0..<messages { try StampedFrameReceivers.send(sequence, from: push) }
                push.close() // retired while the receivers are still reading and closing its frames
                receivers.waitForAll()
                XCTAssertEqual(receivers.mismatches, 0, "round \(round)")
            }
            XCTAssertEqual(liveFramePools(), before, "round \(round): every buffer and the pool freed")
        }
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

/// PULL sockets, each made, read and closed on a thread of its own, that check each frame
/// `send(_:from:)` made and count them: they close libzmq's messages (and so give the
/// sender's buffers back) on their threads.
private final class StampedFrameReceivers: @unchecked Sendable {
    private let expected: Int
    private let counts = LockedValue((received: 0, mismatches: 0))
    private let allReceived = DispatchSemaphore(value: 0)
    private let context: ZMQContext
    private var threads: [TestThread] = [] // the test's thread only

    init(count: Int, connectingTo endpoint: String, in context: ZMQContext, expecting expected: Int) throws {
        self.expected = expected
        self.context = context
        let ready = DispatchSemaphore(value: 0)
        let failures = LockedValue<[String]>([])
        for _ in 0..<count {
            threads.append(TestThread { [self] in
                do {
                    let pull = try ZMQSocket(context: context, type: .pull)
                    try pull.connect(endpoint)
                    ready.signal()
                    receive(on: pull)
                } catch {
                    failures.withLock { $0.append("\(error)") }
                    ready.signal()
                }
            })
        }
        for _ in 0..<count { ready.wait() }
        if let failure = failures.withLock({ $0.first }) {
            stop()
            throw SystemCallError(code: .invalidArgument, call: "receiver: \(failure)")
        }
    }

    /// Reads until the context is shut down.
    private func receive(on pull: ZMQSocket) {
        while true {
            do {
                let matches = try pull.receive(dontWait: false) { frames in
                    frames.count == 1 && StampedFrameReceivers.isIntact(frames[0])
                }
                let received = counts.withLock { counts in
                    counts.received += 1
                    if matches != true { counts.mismatches += 1 }
                    return counts.received
                }
                if received == expected { allReceived.signal() }
            } catch {
                return // terminated
            }
        }
    }

    /// The frame of message `sequence`: its sequence number, then bytes derived from it, in
    /// sizes across every class (and over the largest).
    static func send(_ sequence: Int, from push: ZMQSocket) throws {
        let sizes = [34, 85, 300, 1500, 6000, 20_000, 50_000, 70_000]
        let size = sizes[sequence % sizes.count]
        _ = try push.sendFrame(byteCount: size, more: false, dontWait: false) { buffer in
            buffer.storeBytes(of: UInt64(sequence), as: UInt64.self)
            for offset in stride(from: 8, to: size, by: 97) {
                buffer[offset] = UInt8(truncatingIfNeeded: sequence &+ offset)
            }
            buffer[size - 1] = UInt8(truncatingIfNeeded: sequence &* 3)
        }
    }

    private static func isIntact(_ frame: UnsafeRawBufferPointer) -> Bool {
        guard frame.count >= 34 else { return false }
        let sequence = Int(frame.loadUnaligned(as: UInt64.self))
        guard frame[frame.count - 1] == UInt8(truncatingIfNeeded: sequence &* 3) else { return false }
        return stride(from: 8, to: frame.count - 1, by: 97).allSatisfy { frame[$0] == UInt8(truncatingIfNeeded: sequence &+ $0) }
    }

    var mismatches: Int { counts.withLock { $0.mismatches } }

    func waitForAll() { waitOrFail(allReceived, seconds: 60, "every frame at the receivers") }

    /// Ends the receivers' blocking reads (a context shutdown) and joins their threads.
    func stop() {
        try? context.shutdown()
        for thread in threads { thread.join() }
    }
}
