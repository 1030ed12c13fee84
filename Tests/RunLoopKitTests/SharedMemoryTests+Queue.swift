import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopSystem
import RunLoopTestSupport
import RunLoopWire
import RunLoopZMQ
import XCTest

/// One sender's messages arrive in the order it sent them, whichever way each travelled:
/// a note queued in its ring, a note over ZeroMQ, plain frames, a request (`docs/wire-format.md`,
/// "Shared memory", the queue and its fences).
extension SharedMemoryTests {
    /// How the `index`-th message of the mixed stream travels.
    enum MixedKind: CaseIterable {
        /// One 64 KiB data component, copied into the ring (or queued after the one before).
        case copied
        /// One 64 KiB data component, filled in place in the ring.
        case filled
        /// One 1 KiB data component: plain frames.
        case small
        /// One 1 KiB data component filled in place: plain frames, by the filling send's own path.
        case filledSmall
        /// A small and a 64 KiB data component: plain frames (only a sole component is shared).
        case twoComponents
        /// A small request, answered before the next message is sent.
        case request
    }

    static let mixedCount = 600
    static let mixedFirstID: Int32 = 2000

    /// The kinds of the mixed stream, the same in both processes: runs of ring messages of
    /// 0 to 7, then one of the other kinds, from a fixed seed.
    static var mixedKinds: [MixedKind] {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ bound: UInt64) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % bound)
        }
        var kinds: [MixedKind] = []
        while kinds.count < mixedCount {
            for _ in 0..<next(8) { kinds.append(next(2) == 0 ? .copied : .filled) }
            kinds.append([.small, .filledSmall, .twoComponents, .request][next(4)])
        }
        return Array(kinds.prefix(mixedCount))
    }

    static func mixedSize(_ kind: MixedKind) -> Int {
        switch kind {
        case .copied, .filled: SharedRingLayout.gate
        case .small, .filledSmall, .twoComponents, .request: 1024
        }
    }

    /// Waits for the ring, then sends the mixed stream as fast as it can, and a request
    /// whose answer says the port handled all of it.
    static func sendMixedStream(to name: String) throws -> Bool {
        let remote = try RemotePort(named: name)
        try remote.send(LoopMessage(id: 100, components: [.data(payload(id: 100, count: copiedSize))]))
        guard try waitForRing(to: remote) else { return childReport(false, "no ring after the port's welcome") }
        for (index, kind) in mixedKinds.enumerated() {
            let id = mixedFirstID + Int32(index)
            let size = mixedSize(kind)
            switch kind {
            case .copied, .small:
                try remote.send(LoopMessage(id: id, components: [.data(payload(id: id, count: size))]), timeout: .seconds(20))
            case .filled, .filledSmall:
                try remote.send(id: id, byteCount: size, timeout: .seconds(20)) { (buffer) throws(Never) in fill(buffer, id: id) }
            case .twoComponents:
                try remote.send(LoopMessage(id: id, components: [.data(payload(id: id, count: size)),
                                                                 .data(payload(id: id, count: SharedRingLayout.gate))]),
                                timeout: .seconds(20))
            case .request:
                let answer = try remote.sendRequest(LoopMessage(id: id, components: [.data(payload(id: id, count: size))]),
                                                    receiveTimeout: .seconds(20))
                guard answer.id == id else { return childReport(false, "request \(id) answered as \(answer.id)") }
            }
        }
        let answer = try remote.sendRequest(LoopMessage(id: 9999, text: "done?"), receiveTimeout: .seconds(30))
        return childReport(answer.text == "all handled", "the port's answer: \(answer.text ?? "none")")
    }

    private func checkMixedOrder(borrowing: Bool, test: String) throws {
        let mode = uniqueMode("mixed")
        let name = uniqueName("mixed")
        let kinds = Self.mixedKinds
        var received: [Int32] = []
        var bad: [Int32] = []
        var answered = false
        func handle(_ id: Int32, _ bytes: UnsafeRawBufferPointer?) -> LoopMessage? {
            if id == 9999 {
                answered = true
                return LoopMessage(id: 9999, text: "all handled")
            }
            guard id >= Self.mixedFirstID else { return nil } // the first one, before the ring
            received.append(id)
            let index = Int(id - Self.mixedFirstID)
            if !kinds.indices.contains(index)
                || !(bytes.map { Self.isPayload($0, id: id, count: Self.mixedSize(kinds[index])) } ?? false) {
                bad.append(id)
            }
            return nil
        }
        let port = try LocalPort(name: name) { message in
            message.firstData.map { bytes in bytes.withUnsafeBytes { handle(message.id, $0) } } ?? handle(message.id, nil)
        }
        if borrowing { port.handler = .borrowing { view in handle(view.id, view.firstData) } }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        let child = try SpawnedProcess(childTestArguments(self, test: test), environment: [Self.scenarioVariable: "mixed:\(name)"])
        XCTAssertTrue(runCurrentLoop(in: mode, safetyNet: .seconds(60)) { answered })
        XCTAssertEqual(child.waitForExit(), .exited(0), child.stdout + child.stderr)
        let expected = (0..<Int32(Self.mixedCount)).map { Self.mixedFirstID + $0 }
        XCTAssertEqual(received.count, expected.count)
        XCTAssertEqual(Set(received).count, received.count, "none twice")
        let outOfPlace: Int? = received.indices.first { index in index >= expected.count || received[index] != expected[index] }
        XCTAssertTrue(received == expected, "in the order sent; first out of place at \(String(describing: outOfPlace))")
        XCTAssertEqual(bad, [], "every payload intact")
        let counters = try XCTUnwrap(port.descriptorReceiver?.counters)
        let shared = kinds.filter { $0 == .copied || $0 == .filled }.count
        XCTAssertEqual(counters.sharedComponents, shared, "every sole large component in the ring")
        XCTAssertGreaterThan(counters.queuedNotes, shared / 2, "most of them queued there, after one in the ring")
        XCTAssertLessThan(counters.queuedNotes, shared, "and after each other message, one over ZeroMQ")
        XCTAssertGreaterThan(counters.fences, 0, "a fence before each other message that followed queued ones")
        XCTAssertLessThanOrEqual(counters.fences, kinds.count - shared, "and no more")
    }

    func testOneSendersMessagesReachAnOwnedHandlerInTheOrderSentWhicheverWayEachTravels() throws {
        try checkMixedOrder(borrowing: false, test: #function)
    }

    func testOneSendersMessagesReachABorrowingHandlerInTheOrderSentWhicheverWayEachTravels() throws {
        try checkMixedOrder(borrowing: true, test: #function)
    }
}

// MARK: - The queue, by hand

/// A sending ring handed to another thread, which alone uses it from then on.
private final class RingHandoff: @unchecked Sendable {
    let ring: SendingRing
    init(_ ring: SendingRing) { self.ring = ring }
}

extension SharedMemoryTests {
    /// A port of `mode` whose owned handler records each message's id (and checks a
    /// component of 4096 bytes is its payload), a ring given to it by hand (this test is
    /// the sender) and a raw DEALER to it; component 1 sent over ZeroMQ, delivered, and
    /// the port's doorbell picked up.
    private func queueFixture(mode: LoopMode, delivered: LockedValue<[Int32]>, bad: LockedValue<[Int32]>) throws
        -> (port: LocalPort, ring: SendingRing, channel: DescriptorSender, raw: ZMQSocket) {
        let port = try LocalPort(name: uniqueName("queue")) { message in
            delivered.withLock { $0.append(message.id) }
            if let data = message.firstData, data.count == 4096,
               !data.withUnsafeBytes({ Self.isPayload($0, id: message.id, count: 4096) }) {
                bad.withLock { $0.append(message.id) }
            }
            return nil
        }
        loop.add(port, to: mode)
        let (ring, channel) = try ring(givenTo: port, capacity: 1 << 20)
        let raw = try ZMQSocket(type: .dealer)
        try raw.connect(port.remote.address.rawValue)
        let first = try write(ring, id: 1)
        XCTAssertTrue(try raw.send(note(ring.token, start: first, length: 4096, id: 1), dontWait: false))
        XCTAssertTrue(runCurrentLoop(in: mode) { delivered.withLock { $0 } == [1] })
        ring.pickUpDoorbell(from: channel, force: true)
        XCTAssertGreaterThanOrEqual(ring.doorbell, 0, "the port gave a doorbell as it mapped the ring")
        return (port, ring, channel, raw)
    }

    /// Writes message `id`'s 4096-byte payload at the ring's head; returns where it starts.
    private func write(_ ring: SendingRing, id: Int32) throws -> UInt64 {
        guard case .free(let start, let bytes) = ring.room(for: 4096) else {
            XCTFail("no room in the ring")
            return 0
        }
        Self.fill(bytes, id: id)
        ring.commit(start: start, count: 4096)
        return start
    }

    func testQueuedNotesAreDeliveredAfterTheComponentTheyFollowAndAFenceDeliversThemBeforeWhatFollowsIt() throws {
        let mode = uniqueMode("queue")
        let delivered = LockedValue([Int32]())
        let bad = LockedValue([Int32]())
        let (port, ring, channel, raw) = try queueFixture(mode: mode, delivered: delivered, bad: bad)
        defer { port.invalidate() }
        defer { withExtendedLifetime(channel) {} }
        let dropsBefore = loop.snapshot().counters.messagesDropped[.unknownDescriptors] ?? 0
        // 2 after 1, 3 after 2: queued, no ZeroMQ message at all.
        var last: UInt64 = 0 // where component 1 starts: a fresh ring's first
        let second = try write(ring, id: 2)
        XCTAssertTrue(ring.enqueue(id: 2, start: second, length: 4096, after: last))
        last = second
        let third = try write(ring, id: 3)
        XCTAssertTrue(ring.enqueue(id: 3, start: third, length: 4096, after: last))
        XCTAssertTrue(runCurrentLoop(in: mode) { delivered.withLock { $0 }.count == 3 })
        // 5 after 4, whose note has not come: it waits for it.
        let fourth = try write(ring, id: 4)
        let fifth = try write(ring, id: 5)
        XCTAssertTrue(ring.enqueue(id: 5, start: fifth, length: 4096, after: fourth))
        _ = loop.run(mode: mode, timeout: .milliseconds(50), returnAfterSourceHandled: false)
        XCTAssertEqual(delivered.withLock { $0 }, [1, 2, 3], "a queued note waits for the one it follows")
        XCTAssertTrue(try raw.send(note(ring.token, start: fourth, length: 4096, id: 4), dontWait: false))
        XCTAssertTrue(runCurrentLoop(in: mode) { delivered.withLock { $0 }.count == 5 })
        // 6 after a component that never came, then a fence through 6, then a plain message:
        // the fence delivers 6 first.
        let sixth = try write(ring, id: 6)
        XCTAssertTrue(ring.enqueue(id: 6, start: sixth, length: 4096, after: sixth - 1))
        XCTAssertTrue(try raw.send(note(ring.token, start: sixth, length: 0, id: 0), dontWait: false))
        XCTAssertTrue(try raw.send(WireCodec.encode(WireMessage(messageID: 7, components: [.data([7])])), dontWait: false))
        XCTAssertTrue(runCurrentLoop(in: mode) { delivered.withLock { $0 }.last == 7 })
        XCTAssertEqual(delivered.withLock { $0 }, [1, 2, 3, 4, 5, 6, 7], "each in its order, the fence no message")
        XCTAssertEqual(bad.withLock { $0 }, [])
        XCTAssertEqual((loop.snapshot().counters.messagesDropped[.unknownDescriptors] ?? 0) - dropsBefore, 0, "a fence is no drop")
        let counters = try XCTUnwrap(port.descriptorReceiver?.counters)
        XCTAssertEqual(counters.queuedNotes, 4)
        XCTAssertEqual(counters.sharedComponents, 6)
        XCTAssertEqual(counters.fences, 1)
    }

    func testASleepingPortIsWokenByTheDoorbellOfANoteQueuedFromAnotherThread() throws {
        let mode = uniqueMode("queue-sleep")
        let delivered = LockedValue([Int32]())
        let bad = LockedValue([Int32]())
        let (port, ring, channel, _) = try queueFixture(mode: mode, delivered: delivered, bad: bad)
        defer { port.invalidate() }
        defer { withExtendedLifetime(channel) {} }
        // One queued and delivered first: its doorbell took the port's arming, which the
        // port renews as it drains.
        let second = try write(ring, id: 2)
        XCTAssertTrue(ring.enqueue(id: 2, start: second, length: 4096, after: 0))
        XCTAssertTrue(runCurrentLoop(in: mode) { delivered.withLock { $0 }.count == 2 })
        let third = try write(ring, id: 3)
        // What the deliveries left to do (a ZeroMQ descriptor's last signal) is done
        // before the loop is watched asleep: then only the doorbell can wake it.
        _ = loop.run(mode: mode, timeout: .milliseconds(50), returnAfterSourceHandled: false)
        let handoff = RingHandoff(ring)
        let asleep = DispatchSemaphore(value: 0)
        var wakeUps = 0
        loop.add(LoopObserver(activities: .beforeWaiting, repeats: false) { _, _ in asleep.signal() }, to: mode)
        loop.add(LoopObserver(activities: .afterWaiting) { _, _ in wakeUps += 1 }, to: mode)
        let sender = TestThread {
            asleep.wait()
            _ = handoff.ring.enqueue(id: 3, start: third, length: 4096, after: second)
        }
        XCTAssertEqual(loop.run(mode: mode, timeout: .seconds(10), returnAfterSourceHandled: true), .handledSource)
        sender.join()
        XCTAssertEqual(delivered.withLock { $0 }, [1, 2, 3])
        XCTAssertGreaterThanOrEqual(wakeUps, 1, "the loop slept in its poll set until the doorbell rang")
        XCTAssertEqual(bad.withLock { $0 }, [])
    }
}

extension SharedMemoryTests {
    func testAQueuedNoteOutsideItsRingIsACountedDropAndAQueueThatSaysMoreThanItHoldsIsNotReadAgain() throws {
        let mode = uniqueMode("queue-hostile")
        let delivered = LockedValue([Int32]())
        let bad = LockedValue([Int32]())
        let (port, ring, channel, raw) = try queueFixture(mode: mode, delivered: delivered, bad: bad)
        defer { port.invalidate() }
        defer { withExtendedLifetime(channel) {} } // its connection open: the ring is not orphaned
        // A hostile sender writes its header page as it likes: its own mapping of the ring.
        let page = try Kernel.mapForReadingAndWriting(ring.descriptor, count: SharedRingLayout.headerSize)
        defer { try? Kernel.unmap(UnsafeRawBufferPointer(page)) }
        let header = SharedRingHeader(base: try XCTUnwrap(page.baseAddress))
        let dropsBefore = loop.snapshot().counters.messagesDropped[.unknownDescriptors] ?? 0
        let doorbell = ring.doorbell
        func ringTheDoorbell() throws {
            var byte: UInt8 = 1
            _ = try withUnsafeBytes(of: &byte) { bytes throws(SystemCallError) in
                try Kernel.sendWithDescriptors(doorbell, bytes, descriptors: [])
            }
        }
        // Bytes past the ring's end, after component 1 (at 0): taken, dropped, counted.
        QueuedNote(after: 0, start: UInt64(ring.capacity) - 10, length: 4096, id: 2).write(to: header.queueEntry(0))
        header.published.store(1, ordering: .sequentiallyConsistent)
        try ringTheDoorbell()
        XCTAssertTrue(waitUntil(within: .seconds(10)) { // a drop is no handled source: the run goes on
            _ = loop.run(mode: mode, timeout: .milliseconds(5), returnAfterSourceHandled: true)
            return (loop.snapshot().counters.messagesDropped[.unknownDescriptors] ?? 0) - dropsBefore == 1
        })
        XCTAssertEqual(header.consumed.load(ordering: .sequentiallyConsistent), 1, "taken: the queue goes on")
        // More notes than the queue holds: it is not read again, and nothing is delivered of it.
        QueuedNote(after: UInt64(ring.capacity) - 10, start: 4096, length: 4096, id: 3).write(to: header.queueEntry(1))
        header.published.store(1 + 1000, ordering: .sequentiallyConsistent)
        try ringTheDoorbell()
        _ = loop.run(mode: mode, timeout: .milliseconds(50), returnAfterSourceHandled: false)
        XCTAssertEqual(header.consumed.load(ordering: .sequentiallyConsistent), 1, "a queue that lies is not read")
        // The ring's notes over ZeroMQ still arrive.
        let fourth = try write(ring, id: 4)
        XCTAssertTrue(try raw.send(note(ring.token, start: fourth, length: 4096, id: 4), dontWait: false))
        XCTAssertTrue(runCurrentLoop(in: mode) { delivered.withLock { $0 }.last == 4 })
        XCTAssertEqual(delivered.withLock { $0 }, [1, 4])
        XCTAssertEqual(bad.withLock { $0 }, [])
    }
}

extension SharedMemoryTests {
    func testNotesASenderQueuedBeforeItEndedAreStillDeliveredAndItsDoorbellCloses() throws {
        let mode = uniqueMode("queue-ended")
        let delivered = LockedValue([Int32]())
        let bad = LockedValue([Int32]())
        var fixture: (port: LocalPort, ring: SendingRing, channel: DescriptorSender, raw: ZMQSocket)? =
            try queueFixture(mode: mode, delivered: delivered, bad: bad)
        let port = try XCTUnwrap(fixture?.port)
        defer { port.invalidate() }
        do {
            let ring = try XCTUnwrap(fixture?.ring)
            let second = try write(ring, id: 2)
            XCTAssertTrue(ring.enqueue(id: 2, start: second, length: 4096, after: 0))
            let third = try write(ring, id: 3)
            XCTAssertTrue(ring.enqueue(id: 3, start: third, length: 4096, after: second))
        }
        // The sending thread ends before the port ran: its ring, its doorbell and its side
        // channel close (the port keeps its own mapping).
        fixture = nil
        XCTAssertTrue(runCurrentLoop(in: mode) { delivered.withLock { $0 }.count == 3 })
        XCTAssertEqual(delivered.withLock { $0 }, [1, 2, 3], "what it queued, in order")
        XCTAssertEqual(bad.withLock { $0 }, [])
        // Its doorbell closed with its end: an idle loop sleeps (no spin on a hung-up socket).
        var wakeUps = 0
        loop.add(LoopObserver(activities: .afterWaiting) { _, _ in wakeUps += 1 }, to: mode)
        let before = threadCPUTime()
        _ = loop.run(mode: mode, timeout: .milliseconds(200), returnAfterSourceHandled: false)
        XCTAssertLessThan(threadCPUTime() - before, .milliseconds(100), "the loop slept")
        XCTAssertLessThanOrEqual(wakeUps, 3)
        XCTAssertEqual(port.descriptorReceiver?.queues.filter { $0.ring.doorbell >= 0 }.count, 0, "its doorbell closed")
    }
}
