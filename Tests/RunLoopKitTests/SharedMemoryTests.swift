import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopSystem
import RunLoopTestSupport
import RunLoopWire
import RunLoopZMQ
import XCTest

/// Large data components between processes in shared memory (`docs/wire-format.md`,
/// "Shared memory"): a sender's ring per port, the port's handlers reading the bytes where
/// they lie (borrowed) or copied once (owned), every byte as sent, through more than a
/// ring's worth of data; nothing mapped left behind a sender that ended; a note that names
/// no ring, another's ring, or bytes outside its ring is a counted drop; a ring that could
/// fault or grow under the port is refused.
final class SharedMemoryTests: XCTestCase {
    static let scenarioVariable = "RUNLOOPKIT_SHARED_MEMORY_SCENARIO"

    override func setUp() {
        super.setUp()
        guard let scenario = childScenario(Self.scenarioVariable) else { return }
        endChild { Self.runChild(scenario) }
    }

    var loop: ThreadRunLoop { ThreadRunLoop.current }
    func uniqueName(_ base: String) -> String { "\(base)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))" }
    func uniqueMode(_ base: String) -> LoopMode { LoopMode("\(base)-\(UInt32.random(in: 0...UInt32.max))") }

    // MARK: - Payloads

    /// Message `id`'s payload: 64-bit words, word `i` being `id << 32 | i`.
    static func fill(_ buffer: UnsafeMutableRawBufferPointer, id: Int32) {
        let words = buffer.count / 8
        let base = buffer.baseAddress.unsafelyUnwrapped
        for index in 0..<words {
            base.storeBytes(of: UInt64(UInt32(bitPattern: id)) << 32 | UInt64(index), toByteOffset: 8 * index, as: UInt64.self)
        }
    }

    /// Whether `bytes` are message `id`'s payload of `count` bytes.
    static func isPayload(_ bytes: UnsafeRawBufferPointer, id: Int32, count: Int) -> Bool {
        guard bytes.count == count else { return false }
        let base = bytes.baseAddress.unsafelyUnwrapped
        for index in 0..<count / 8
        where base.loadUnaligned(fromByteOffset: 8 * index, as: UInt64.self) != UInt64(UInt32(bitPattern: id)) << 32 | UInt64(index) {
            return false
        }
        return true
    }

    static func payload(id: Int32, count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { fill($0, id: id) }
        return bytes
    }

    /// This process's mappings (`/proc/self/maps`), read to its end: a file of the proc file
    /// system says it is 0 bytes long, and `String(contentsOfFile:)` reads one page of it
    /// (under ThreadSanitizer, whose shadow mappings come first, none of the rings).
    static func mappings() throws -> [Substring] {
        let file = try XCTUnwrap(FileHandle(forReadingAtPath: "/proc/self/maps"))
        defer { try? file.close() }
        return String(decoding: try file.readToEnd() ?? Data(), as: UTF8.self).split(separator: "\n")
    }

    /// The mappings of shared rings in this process.
    static func ringMappings() throws -> Int {
        try mappings().filter { $0.contains("memfd:runloopkit-ring") }.count
    }

    // MARK: - The child: a sender

    static let smallCount = 4
    static let copiedCount = 60
    static let copiedSize = 256 << 10
    static let filledCount = 24
    static let filledSize = 4 << 20

    static func runChild(_ scenario: String) -> Bool {
        let parts = scenario.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { return childReport(false, "bad scenario \(scenario)") }
        do {
            switch parts[0] {
            case "stream": return try sendStream(to: parts[1])
            case "killed": return try sendAndWaitToBeKilled(to: parts[1])
            case "forked": return try sendFromAForkedChild(to: parts[1])
            case "port-gone": return try sendUntilThePortIsGone(to: parts[1])
            case "no-welcome": return try sendToAPortThatNeverWelcomes(to: parts[1])
            case "mixed": return try sendMixedStream(to: parts[1])
            default: return childReport(false, "unknown scenario \(parts[0])")
            }
        } catch {
            return childReport(false, "\(error)")
        }
    }

    /// Waits until this thread's connection to `remote` has its ring (the port's welcome
    /// read), so that every large component after it is shared: a test then knows how many.
    static func waitForRing(to remote: RemotePort) throws -> Bool {
        let connection = try ThreadPortState.withCurrent { (state) throws(PortError) in try state.existingOrNewConnection(to: remote) }
        return waitUntil(within: .seconds(10)) {
            (try? ThreadPortState.withCurrent { state in state.sharedRing(on: connection) != nil }) ?? false
        }
    }

    /// Sends a few small messages, one large one (plain: the ring is not there yet), waits
    /// for the ring, then `copiedCount` copied and `filledCount` filled large components
    /// (more than a ring holds, so the ring wraps and the sender waits for room), and a
    /// request whose answer says the port handled all of them.
    private static func sendStream(to name: String) throws -> Bool {
        let remote = try RemotePort(named: name)
        for id in 1...Int32(smallCount) { try remote.send(LoopMessage(id: id, components: [.data(payload(id: id, count: 1024))])) }
        try remote.send(LoopMessage(id: 100, components: [.data(payload(id: 100, count: copiedSize))]))
        guard try waitForRing(to: remote) else { return childReport(false, "no ring after the port's welcome") }
        for id in 101...Int32(100 + copiedCount) {
            try remote.send(LoopMessage(id: id, components: [.data(payload(id: id, count: copiedSize))]), timeout: .seconds(20))
        }
        for id in 1001...Int32(1000 + filledCount) {
            try remote.send(id: id, byteCount: filledSize, timeout: .seconds(20)) { (buffer) throws(Never) in fill(buffer, id: id) }
        }
        let answer = try remote.sendRequest(LoopMessage(id: 9999, text: "done?"), receiveTimeout: .seconds(30))
        return childReport(answer.text == "all handled", "the port's answer: \(answer.text ?? "none"); rings mapped here: \(try ringMappings())")
    }

    /// The address ranges of this process's shared ring mappings (`/proc/self/maps`).
    static func ringRanges() throws -> [Range<UInt>] {
        try mappings()
            .filter { $0.contains("memfd:runloopkit-ring") }
            .compactMap { line in
                let bounds = line.prefix { $0 != " " }.split(separator: "-").compactMap { UInt($0, radix: 16) }
                return bounds.count == 2 ? bounds[0]..<bounds[1] : nil
            }
    }

    /// Waits for the ring, sends a large component, forks; the forked child sends a large
    /// component filled in place on the connection it inherited, which must fail as any
    /// send of a forked child does (`forkedChild`) without the child having been lent any
    /// of the ring: its mapping is the parent's too. Then the parent sends one more and a
    /// request whose answer says the port handled what it got.
    private static func sendFromAForkedChild(to name: String) throws -> Bool {
        let remote = try RemotePort(named: name)
        try remote.send(LoopMessage(id: 100, components: [.data(payload(id: 100, count: copiedSize))]))
        guard try waitForRing(to: remote) else { return childReport(false, "no ring after the port's welcome") }
        try remote.send(LoopMessage(id: 101, components: [.data(payload(id: 101, count: copiedSize))]))
        let rings = try ringRanges()
        guard !rings.isEmpty else { return childReport(false, "no ring mapped in the sender") }
        let child = fork()
        if child == 0 {
            var lent: UInt = 0
            do {
                try remote.send(id: 102, byteCount: copiedSize, timeout: .seconds(1)) { (buffer) throws(Never) in
                    lent = UInt(bitPattern: buffer.baseAddress)
                    fill(buffer, id: 102)
                }
                _exit(2) // sent: nothing failed
            } catch .port(.system(let error)) where error.code == .forkedChild {
                _exit(rings.contains { $0.contains(lent) } ? 4 : 0)
            } catch {
                _exit(3)
            }
        }
        guard child > 0 else { return childReport(false, "fork failed: errno \(errno)") }
        var status: Int32 = 0
        guard waitpid(child, &status, 0) == child, status & 0x7F == 0 else { return childReport(false, "the forked child was killed") }
        let exitStatus = (status >> 8) & 0xFF
        guard childReport(exitStatus == 0, "the forked child's send: status \(exitStatus) (4: lent the parent's ring)") else { return false }
        try remote.send(LoopMessage(id: 103, components: [.data(payload(id: 103, count: copiedSize))]))
        let answer = try remote.sendRequest(LoopMessage(id: 9999, text: "done?"), receiveTimeout: .seconds(30))
        return childReport(answer.text == "all handled", "the port's answer: \(answer.text ?? "none")")
    }

    /// Waits for the ring, sends a large component, then large components until the port
    /// is gone (its owner invalidated it on the first): the send fails (`remoteInvalid`),
    /// and this thread's ring is unmapped with the connection, nothing of it left here.
    private static func sendUntilThePortIsGone(to name: String) throws -> Bool {
        let remote = try RemotePort(named: name)
        try remote.send(LoopMessage(id: 100, components: [.data(payload(id: 100, count: copiedSize))]))
        guard try waitForRing(to: remote) else { return childReport(false, "no ring after the port's welcome") }
        let mapped = try ringMappings()
        guard mapped > 0 else { return childReport(false, "no ring mapped in the sender") }
        var failure: PortError?
        let gone = waitUntil(within: .seconds(20)) {
            do throws(PortError) {
                try remote.send(LoopMessage(id: 101, components: [.data(payload(id: 101, count: copiedSize))]),
                                timeout: .seconds(1))
                return false
            } catch {
                failure = error
                return true
            }
        }
        guard gone, case .remoteInvalid = failure else {
            return childReport(false, "sends to a gone port: \(failure.map { "\($0)" } ?? "never failed")")
        }
        let after = try ringMappings()
        return childReport(after == 0, "the sender's ring mappings: \(mapped) with the port, \(after) once it was gone")
    }

    /// Sends large components to a port whose side channel never says it maps rings (a
    /// port of before them): they go as plain frames while the sender waits for the
    /// welcome and once it gave up on it (`SharedRingState.welcomeWait`); then a request
    /// whose answer says the port handled them.
    private static func sendToAPortThatNeverWelcomes(to name: String) throws -> Bool {
        let remote = try RemotePort(named: name)
        let connection = try ThreadPortState.withCurrent { (state) throws(PortError) in try state.existingOrNewConnection(to: remote) }
        var sent = 0
        var id: Int32 { Int32(100 + sent % 800) } // 100 up to 899: large, copied (`streamPort`)
        var sendFailure: PortError?
        let gaveUp = waitUntil(within: .seconds(10)) {
            do throws(PortError) {
                try remote.send(LoopMessage(id: id, components: [.data(payload(id: id, count: copiedSize))]))
                sent += 1
            } catch {
                sendFailure = error
                return true
            }
            if case .unavailable = connection.sharedRing { return true }
            return false
        }
        guard gaveUp, sendFailure == nil else { return childReport(false, "sends: \(sendFailure.map { "\($0)" } ?? "never gave up")") }
        for _ in 0..<5 {
            try remote.send(LoopMessage(id: id, components: [.data(payload(id: id, count: copiedSize))]))
            sent += 1
        }
        let answer = try remote.sendRequest(LoopMessage(id: 9999, text: "done?"), receiveTimeout: .seconds(30))
        print("SENT \(sent)")
        return childReport(answer.text == "all handled", "the port's answer: \(answer.text ?? "none")")
    }

    /// Waits for the ring, sends three large components, says so, and waits to be killed.
    private static func sendAndWaitToBeKilled(to name: String) throws -> Bool {
        let remote = try RemotePort(named: name)
        try remote.send(LoopMessage(id: 100, components: [.data(payload(id: 100, count: copiedSize))]))
        guard try waitForRing(to: remote) else { return childReport(false, "no ring after the port's welcome") }
        for id in 101...103 as ClosedRange<Int32> {
            try remote.send(LoopMessage(id: id, components: [.data(payload(id: id, count: copiedSize))]))
        }
        print("SENT \(getpid())")
        fflush(nil)
        alarm(60) // the parent kills it long before; never outlive a parent that failed
        while true { pause() }
    }

    // MARK: - Tests

    /// The port of `name`, whose handler checks every payload (owned or borrowed), and
    /// answers the child's last request.
    private func streamPort(name: String, borrowing: Bool, checked: LockedValue<(good: Int, bad: [Int32])>,
                            answered: LockedValue<Bool>) throws -> LocalPort {
        func check(_ id: Int32, _ bytes: UnsafeRawBufferPointer?) {
            let size = id < 100 ? 1024 : id < 1000 ? Self.copiedSize : Self.filledSize
            let good = bytes.map { Self.isPayload($0, id: id, count: size) } ?? false
            checked.withLock { good ? ($0.good += 1) : $0.bad.append(id) }
        }
        let port = try LocalPort(name: name) { message in
            guard message.id != 9999 else {
                answered.withLock { $0 = true }
                return LoopMessage(id: 9999, text: "all handled")
            }
            message.firstData.map { bytes in bytes.withUnsafeBytes { check(message.id, $0) } } ?? check(message.id, nil)
            return nil
        }
        if borrowing {
            port.handler = .borrowing { view in
                guard view.id != 9999 else {
                    answered.withLock { $0 = true }
                    return LoopMessage(id: 9999, text: "all handled")
                }
                check(view.id, view.firstData)
                return nil
            }
        }
        return port
    }

    private func checkStream(borrowing: Bool, test: String) throws {
        let mode = uniqueMode("stream")
        let name = uniqueName("stream")
        let checked = LockedValue((good: 0, bad: [Int32]()))
        let answered = LockedValue(false)
        let port = try streamPort(name: name, borrowing: borrowing, checked: checked, answered: answered)
        defer { port.invalidate() }
        loop.add(port, to: mode)
        let mappedBefore = try Self.ringMappings()
        let child = try SpawnedProcess(childTestArguments(self, test: test), environment: [Self.scenarioVariable: "stream:\(name)"])
        XCTAssertTrue(runCurrentLoop(in: mode, safetyNet: .seconds(60)) { answered.withLock { $0 } })
        XCTAssertEqual(child.waitForExit(), .exited(0), child.stdout + child.stderr)
        let total = Self.smallCount + 1 + Self.copiedCount + Self.filledCount
        XCTAssertEqual(checked.withLock { $0.good }, total)
        XCTAssertEqual(checked.withLock { $0.bad }, [])
        let counters = try XCTUnwrap(port.descriptorReceiver?.counters)
        XCTAssertEqual(counters.ringsMapped, 1, "one ring for the child's sending thread")
        XCTAssertEqual(counters.sharedComponents, Self.copiedCount + Self.filledCount,
                       "every large component after the welcome travelled in the ring, the first one and the small ones did not")
        // The port gives the doorbell as it maps the ring, before it gives the first
        // component back; the sender cannot get further ahead than its window (16 copied
        // components), and picks the doorbell up at its next send: every note after that
        // is queued in the ring, none over ZeroMQ.
        XCTAssertGreaterThanOrEqual(counters.queuedNotes, Self.copiedCount + Self.filledCount - 17,
                                    "the notes that followed one in the ring were queued there")
        XCTAssertGreaterThan(try Self.ringMappings(), mappedBefore, "the ring mapped here")
        // The child ended: its ring is unmapped once the grace for its last notes is over.
        port.descriptorReceiver?.orphanGrace = .milliseconds(50)
        XCTAssertTrue(waitUntil(within: .seconds(10)) {
            _ = loop.run(mode: mode, until: .after(.milliseconds(5)), returnAfterSourceHandled: true)
            return port.descriptorReceiver?.mappedRingCount == 0
        })
        XCTAssertEqual(try Self.ringMappings(), mappedBefore, "nothing of the ring left mapped")
    }

    func testLargeComponentsFromAnotherProcessTravelInItsRingAndReachAnOwnedHandlerIntact() throws {
        try checkStream(borrowing: false, test: #function)
    }

    func testLargeComponentsFromAnotherProcessAreReadWhereTheyLieByABorrowingHandlerIntact() throws {
        try checkStream(borrowing: true, test: #function)
    }

    func testAForkedChildOfASenderIsNeverLentItsParentsRingAndTheParentsStreamGoesOn() throws {
        let mode = uniqueMode("forked")
        let name = uniqueName("forked")
        let checked = LockedValue((good: 0, bad: [Int32]()))
        let answered = LockedValue(false)
        let port = try streamPort(name: name, borrowing: false, checked: checked, answered: answered)
        defer { port.invalidate() }
        loop.add(port, to: mode)
        let child = try SpawnedProcess(childTestArguments(self, test: #function), environment: [Self.scenarioVariable: "forked:\(name)"])
        XCTAssertTrue(runCurrentLoop(in: mode, safetyNet: .seconds(60)) { answered.withLock { $0 } })
        XCTAssertEqual(child.waitForExit(), .exited(0), child.stdout + child.stderr)
        XCTAssertEqual(checked.withLock { $0.good }, 3, "100, 101 and 103: nothing of the forked child's")
        XCTAssertEqual(checked.withLock { $0.bad }, [])
        XCTAssertEqual(port.descriptorReceiver?.counters.sharedComponents, 2)
    }

    func testAPortThatNeverWelcomesASenderGetsEveryLargeComponentAsPlainFrames() throws {
        let mode = uniqueMode("no-welcome")
        let name = uniqueName("no-welcome")
        let checked = LockedValue((good: 0, bad: [Int32]()))
        let answered = LockedValue(false)
        let port = try streamPort(name: name, borrowing: false, checked: checked, answered: answered)
        defer { port.invalidate() }
        loop.add(port, to: mode)
        // The port's side channel replaced by a listener that takes connections and never
        // writes: a port of before shared rings, as a sender sees it.
        let path = try XCTUnwrap(port.descriptorReceiver?.path)
        try Kernel.unlink(path)
        let silent = try Kernel.unixPacketSocket()
        defer { Kernel.close(silent) }
        try Kernel.listen(silent, atUnixPath: path, backlog: 16)
        let child = try SpawnedProcess(childTestArguments(self, test: #function), environment: [Self.scenarioVariable: "no-welcome:\(name)"])
        XCTAssertTrue(runCurrentLoop(in: mode, safetyNet: .seconds(60)) { answered.withLock { $0 } })
        XCTAssertEqual(child.waitForExit(), .exited(0), child.stdout + child.stderr)
        let sent = try XCTUnwrap(child.stdout.split(separator: "\n").first { $0.hasPrefix("SENT ") }.flatMap { Int($0.dropFirst(5)) })
        XCTAssertGreaterThan(sent, 5)
        XCTAssertEqual(checked.withLock { $0.good }, sent, "every one, intact")
        XCTAssertEqual(checked.withLock { $0.bad }, [])
        XCTAssertEqual(port.descriptorReceiver?.counters.ringsMapped, 0)
        XCTAssertEqual(port.statistics.messagesDropped, 0)
    }

    func testASendersRingIsUnmappedOnceItsPortIsGoneAndTheSendSaysSo() throws {
        let mode = uniqueMode("port-gone")
        let name = uniqueName("port-gone")
        var received = 0
        let port = try LocalPort(name: name) { _ in received += 1; return nil }
        loop.add(port, to: mode)
        let child = try SpawnedProcess(childTestArguments(self, test: #function), environment: [Self.scenarioVariable: "port-gone:\(name)"])
        XCTAssertTrue(runCurrentLoop(in: mode, safetyNet: .seconds(30)) { received >= 2 }, "the plain first and a shared one")
        XCTAssertEqual(port.descriptorReceiver?.counters.ringsMapped, 1)
        port.invalidate() // the port is gone: its side channel and its ring with it
        XCTAssertEqual(child.waitForExit(), .exited(0), child.stdout + child.stderr)
        XCTAssertTrue(child.stdout.contains("PASS the sender's ring mappings"), child.stdout)
    }

    func testTheRingOfASenderKilledMidStreamIsUnmappedOnceItsGraceIsOverWithoutAnotherMessage() throws {
        let mode = uniqueMode("killed")
        let name = uniqueName("killed")
        let received = LockedValue(0)
        let port = try LocalPort(name: name) { message in
            if let bytes = message.firstData, bytes.withUnsafeBytes({ Self.isPayload($0, id: message.id, count: Self.copiedSize) }) {
                received.withLock { $0 += 1 }
            }
            return nil
        }
        defer { port.invalidate() }
        port.descriptorReceiver?.orphanGrace = .milliseconds(200)
        loop.add(port, to: mode)
        let mappedBefore = try Self.ringMappings()
        let child = try SpawnedProcess(childTestArguments(self, test: #function), environment: [Self.scenarioVariable: "killed:\(name)"])
        XCTAssertTrue(runCurrentLoop(in: mode, safetyNet: .seconds(30)) { received.withLock { $0 } == 4 })
        XCTAssertTrue(child.waitForLine("SENT \(child.pid)"), child.stdout + child.stderr)
        XCTAssertEqual(port.descriptorReceiver?.mappedRingCount, 1)
        XCTAssertGreaterThan(try Self.ringMappings(), mappedBefore)
        kill(child.pid, SIGKILL)
        _ = child.waitForExit()
        XCTAssertTrue(waitUntil(within: .seconds(10)) {
            _ = loop.run(mode: mode, until: .after(.milliseconds(5)), returnAfterSourceHandled: true)
            return port.descriptorReceiver?.mappedRingCount == 0
        }, "the ring is unmapped after its sender's hang-up and the grace, with no other message")
        XCTAssertEqual(try Self.ringMappings(), mappedBefore)
        XCTAssertEqual(port.descriptorReceiver?.counters.sharedComponents, 3)
    }
}

// MARK: - Forged and broken rings, in this process

extension SharedMemoryTests {
    /// A ring of `capacity` bytes given to `port` on a side channel of its own, as a sending
    /// thread gives it (not yet named by any note).
    func ring(givenTo port: LocalPort, capacity: Int = 64 << 10) throws -> (SendingRing, DescriptorSender) {
        let ring = try SendingRing(capacity: capacity)
        let channel = try DescriptorSender(path: try XCTUnwrap(port.descriptorReceiver?.path))
        _ = try channel.attach([ring.descriptor], as: ring.token)
        return (ring, channel)
    }

    func note(_ token: DescriptorToken, start: UInt64, length: UInt64, id: Int32) -> [[UInt8]] {
        WireCodec.encode(WireMessage(messageID: id, components: [.sharedData(token: token.bytes, start: start, length: length)]))
    }

    private func checkForgedNotes(borrowing: Bool) throws {
        let mode = uniqueMode("forged-note")
        var delivered: [Int32: [UInt8]] = [:]
        let port = try LocalPort(name: uniqueName("forged-note")) { message in
            delivered[message.id] = message.firstData ?? []
            return nil
        }
        if borrowing {
            port.handler = .borrowing { view in
                delivered[view.id] = view.firstData.map(Array.init) ?? []
                return nil
            }
        }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        let (ring, channel) = try ring(givenTo: port)
        _ = channel
        guard case .free(let start, let bytes) = ring.room(for: 4096) else { return XCTFail("no room in a new ring") }
        Self.fill(bytes, id: 7)
        ring.commit(start: start, count: 4096)
        let raw = try ZMQSocket(type: .dealer)
        try raw.connect(port.remote.address.rawValue)
        let before = loop.snapshot().counters.messagesDropped[.unknownDescriptors] ?? 0
        let capacity = UInt64(ring.capacity)
        let forged: [[[UInt8]]] = [
            note(.random(), start: 0, length: 4096, id: 1), // a token of no ring
            note(ring.token, start: capacity - 100, length: 4096, id: 2), // past the ring's end
            note(ring.token, start: 0, length: capacity + 4096, id: 3), // longer than the ring
            note(ring.token, start: 0, length: 0, id: 4), // no bytes: a fence, no message (not a drop either)
        ]
        for frames in forged { XCTAssertTrue(try raw.send(frames, dontWait: false)) }
        XCTAssertTrue(try raw.send(note(ring.token, start: start, length: 4096, id: 5), dontWait: false))
        XCTAssertTrue(runCurrentLoop(in: mode) { delivered[5] != nil })
        XCTAssertEqual(Array(delivered.keys), [5], "nothing of a forged note is delivered")
        XCTAssertTrue(try XCTUnwrap(delivered[5]).withUnsafeBytes { Self.isPayload($0, id: 7, count: 4096) })
        XCTAssertEqual((loop.snapshot().counters.messagesDropped[.unknownDescriptors] ?? 0) - before, 3)
        XCTAssertEqual(port.descriptorReceiver?.counters.ringsMapped, 1)
    }

    func testANoteNamingNoRingOrBytesOutsideItsRingIsACountedDropForAnOwnedHandler() throws {
        try checkForgedNotes(borrowing: false)
    }

    func testANoteNamingNoRingOrBytesOutsideItsRingIsACountedDropForABorrowingHandler() throws {
        try checkForgedNotes(borrowing: true)
    }

    func testARingThatCouldShrinkOrIsNoRingsLayoutIsRefusedAndCountedNeverMapped() throws {
        let mode = uniqueMode("refused")
        var delivered: [Int32] = []
        let port = try LocalPort(name: uniqueName("refused")) { message in delivered.append(message.id); return nil }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        let channel = try DescriptorSender(path: try XCTUnwrap(port.descriptorReceiver?.path))
        // A memory file of a ring's size and header, not sealed: its sender could shrink it
        // under the port's reads (a fault).
        let unsealed = try Kernel.memoryFile(named: "unsealed")
        defer { Kernel.close(unsealed) }
        try Kernel.setSize(unsealed, to: SharedRingLayout.headerSize + 65536)
        let header = try Kernel.mapForReadingAndWriting(unsealed, count: SharedRingLayout.headerSize)
        header.copyBytes(from: SharedRingLayout.magic + [SharedRingLayout.version, 0, 0, 0])
        header.storeBytes(of: UInt64(65536).littleEndian, toByteOffset: SharedRingLayout.capacityOffset, as: UInt64.self)
        try Kernel.unmap(UnsafeRawBufferPointer(header))
        // Sealed, but its header says another size than the file's.
        let lying = try Kernel.memoryFile(named: "lying")
        defer { Kernel.close(lying) }
        try Kernel.setSize(lying, to: SharedRingLayout.headerSize + 65536)
        let lyingHeader = try Kernel.mapForReadingAndWriting(lying, count: SharedRingLayout.headerSize)
        lyingHeader.copyBytes(from: SharedRingLayout.magic + [SharedRingLayout.version, 0, 0, 0])
        lyingHeader.storeBytes(of: UInt64(1 << 20).littleEndian, toByteOffset: SharedRingLayout.capacityOffset, as: UInt64.self)
        try Kernel.unmap(UnsafeRawBufferPointer(lyingHeader))
        try Kernel.addSeals([.shrink, .grow, .seal], to: lying)
        // Not a memory file at all.
        var ends: [Int32] = [-1, -1]
        try systemCall("pipe") { nonBlockingPipe(&ends) }
        defer { ends.forEach(Kernel.close) }
        let raw = try ZMQSocket(type: .dealer)
        try raw.connect(port.remote.address.rawValue)
        for (id, fd) in [(1, unsealed), (2, lying), (3, ends[0])] as [(Int32, Int32)] {
            let token = try channel.attach([fd])
            XCTAssertTrue(try raw.send(note(token, start: 0, length: 4096, id: id), dontWait: false))
        }
        XCTAssertTrue(try raw.send(WireCodec.encode(LoopMessage(id: 4).wire(kind: .message)), dontWait: false))
        XCTAssertTrue(runCurrentLoop(in: mode) { delivered == [4] })
        XCTAssertEqual(port.descriptorReceiver?.counters.ringsRefused, 3)
        XCTAssertEqual(port.descriptorReceiver?.mappedRingCount, 0)
    }
}

// MARK: - The slot protocol

extension SharedMemoryTests {
    func testARegionIsNotWrittenAgainBeforeTheReceiverGivesItBackAndAWaitingSenderWakesWhenItDoes() throws {
        let ring = try SendingRing(capacity: 16 << 10)
        let mapped = try MappedRing(checking: ring.descriptor)
        var starts: [UInt64] = []
        for _ in 0..<2 {
            guard case .free(let start, _) = ring.room(for: 8 << 10) else { return XCTFail("room for two halves") }
            ring.commit(start: start, count: 8 << 10)
            starts.append(start)
        }
        XCTAssertEqual(starts, [0, 8192])
        guard case .full(let wakeAt) = ring.room(for: 4096) else { return XCTFail("a full ring has no room") }
        XCTAssertEqual(wakeAt, 8192, "woken once half the window (the whole ring, here) is given back")
        XCTAssertFalse(ring.waitForRoom(wakeAt: wakeAt, before: .after(.milliseconds(20))), "nothing given back: the deadline")
        // Given back from another thread while the sender sleeps: it wakes long before its deadline.
        XCTAssertNotNil(mapped.resolve(SharedNote(token: ring.token, start: 0, length: 8192)), "lent to a handler")
        let receiver = ReceivingSide(mapped)
        let giver = TestThread { receiver.ring.giveBack(endingAt: 8192) }
        let start = Deadline.now()
        XCTAssertTrue(ring.waitForRoom(wakeAt: wakeAt, before: .after(.seconds(20))))
        giver.join()
        XCTAssertLessThan(Deadline.now() - start, .seconds(10))
        ring.doneWaiting()
        guard case .free(let next, _) = ring.room(for: 8 << 10) else { return XCTFail("the first half was given back") }
        XCTAssertEqual(next, 16384, "at the start of the data again: position 16384")
        // A tail past the head is no receiver's: the ring is not used again.
        XCTAssertNotNil(mapped.resolve(SharedNote(token: ring.token, start: (1 << 40) - 4096, length: 4096)))
        mapped.giveBack(endingAt: 1 << 40)
        guard case .broken = ring.room(for: 4096) else { return XCTFail("a tail past the head is taken for a broken ring") }
    }

    func testARegionStillLentIsNotFreedByALaterOneGivenBackFirstAsANestedRunDoes() throws {
        let ring = try SendingRing(capacity: 16 << 10)
        let mapped = try MappedRing(checking: ring.descriptor)
        for _ in 0..<2 {
            guard case .free(let start, _) = ring.room(for: 8 << 10) else { return XCTFail("room for two halves") }
            ring.commit(start: start, count: 8 << 10)
        }
        // The outer handler reads the first half; a run nested in it delivers the second and
        // gives it back first.
        XCTAssertNotNil(mapped.resolve(SharedNote(token: ring.token, start: 0, length: 8192)))
        XCTAssertNotNil(mapped.resolve(SharedNote(token: ring.token, start: 8192, length: 8192)))
        mapped.giveBack(endingAt: 16384)
        guard case .full = ring.room(for: 8 << 10) else { return XCTFail("the first half, still read, was freed") }
        mapped.giveBack(endingAt: 8192)
        guard case .free(let next, _) = ring.room(for: 8 << 10) else { return XCTFail("both halves came back") }
        XCTAssertEqual(next, 16384)
        mapped.giveBack(endingAt: 8192) // twice: nothing more
        guard case .free = ring.room(for: 8 << 10) else { return XCTFail("a region given back twice broke the ring") }
    }
}

/// A mapped ring handed to another thread by a test, which alone uses it there.
private final class ReceivingSide: @unchecked Sendable {
    let ring: MappedRing
    init(_ ring: MappedRing) { self.ring = ring }
}

// MARK: - The port's table of rings

extension SharedMemoryTests {
    func testAPortMapsOneRingPerConnectionAtMostSixtyFourAndUnmapsAClosedConnectionsAfterItsGrace() throws {
        var table = SharedRingTable()
        var senders: [SendingRing] = []
        func mapped() throws -> MappedRing {
            let sender = try SendingRing(capacity: 4096)
            senders.append(sender)
            return try MappedRing(checking: sender.descriptor)
        }
        XCTAssertTrue(table.admits(from: 3, orphaned: false))
        table.add(try mapped(), token: .random(), pid: 1, connection: 3, orphanedAt: nil)
        XCTAssertFalse(table.admits(from: 3, orphaned: false), "one ring per connection")
        for connection in 4..<Int32(3 + table.maxRings) {
            XCTAssertTrue(table.admits(from: connection, orphaned: false))
            table.add(try mapped(), token: .random(), pid: 1, connection: connection, orphanedAt: nil)
        }
        XCTAssertEqual(table.count, 64)
        XCTAssertFalse(table.admits(from: 1000, orphaned: false), "at most 64 rings")
        XCTAssertNil(table.nextUnmap(grace: .seconds(10)), "nothing to unmap while every connection is open")
        let closedAt = Deadline.now()
        XCTAssertTrue(table.connectionClosed(3, at: closedAt))
        XCTAssertFalse(table.connectionClosed(1000, at: closedAt), "a connection that gave no ring")
        XCTAssertEqual(table.nextUnmap(grace: .seconds(10)), closedAt + .seconds(10))
        XCTAssertTrue(table.unmapOrphans(at: closedAt + .seconds(9), grace: .seconds(10)).isEmpty)
        XCTAssertEqual(table.count, 64, "not before its grace is over")
        XCTAssertEqual(table.unmapOrphans(at: closedAt + .seconds(10), grace: .seconds(10)).count, 1)
        XCTAssertEqual(table.count, 63)
        XCTAssertFalse(table.hasOrphans)
        XCTAssertTrue(table.admits(from: 3, orphaned: false), "room again, for a new connection numbered as the closed one")
    }
}
