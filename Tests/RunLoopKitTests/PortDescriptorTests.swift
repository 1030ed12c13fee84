import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopWire
import RunLoopZMQ
import XCTest

/// Descriptors in messages (`LoopMessage.Component.descriptor`): a named port's handler
/// gets a descriptor of its own, closed with the message unless it takes it; none is left
/// open when handlers throw, ports are invalidated with messages queued, or the sender dies
/// (no other message needed); a live sender's flood without messages is bounded; tcp is
/// refused before anything is sent; a forged token is a counted drop. Leaks are
/// counted as the entries of `/proc/self/fd` that are the test's own pipe.
final class PortDescriptorTests: XCTestCase {
    static let scenarioVariable = "RUNLOOPKIT_PORT_DESCRIPTOR_SCENARIO"

    private var loop: ThreadRunLoop { ThreadRunLoop.current }
    private var counters: LoopCounters { loop.snapshot().counters }

    override func setUp() {
        super.setUp()
        guard let scenario = childScenario(Self.scenarioVariable) else { return }
        endChild { Self.runChild(scenario) }
    }

    private func uniqueName(_ base: String) -> String { "\(base)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))" }
    private func uniqueMode(_ base: String) -> LoopMode { LoopMode("\(base)-\(UInt32.random(in: 0...UInt32.max))") }

    /// A pipe, both ends close-on-exec and non-blocking.
    private static func pipe() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        try systemCall("pipe") { nonBlockingPipe(&ends) }
        return (ends[0], ends[1])
    }

    /// How many of this process's descriptors refer to the pipe `fd` is an end of.
    private static func copies(ofPipe fd: Int32) throws -> Int {
        let target = try Kernel.status(fd).st_ino
        return try Kernel.directoryEntries("/proc/self/fd").filter { entry in
            guard let number = Int32(entry), let info = try? Kernel.status(number) else { return false }
            return info.st_ino == target && (info.st_mode & S_IFMT) == S_IFIFO
        }.count
    }

    private static func read(_ fd: Int32) -> String? {
        var bytes = [UInt8](repeating: 0, count: 256)
        guard let count = try? bytes.withUnsafeMutableBytes({ try Kernel.read(fd, into: $0) }) else { return nil }
        return String(decoding: bytes.prefix(count), as: UTF8.self)
    }

    private static func write(_ fd: Int32, _ text: String) throws {
        _ = try Array(text.utf8).withUnsafeBytes { try Kernel.write(fd, $0) }
    }

    // MARK: - In this process

    func testADescriptorSentToANamedPortIsTheHandlersOwnAndClosesWithTheMessage() throws {
        let mode = uniqueMode("descriptor")
        let ends = try Self.pipe()
        defer { Kernel.close(ends.read) }
        var received: [Int32] = []
        let port = try LocalPort(name: uniqueName("descriptor")) { message in
            for descriptor in message.descriptors {
                received.append(descriptor.descriptor ?? -1)
                try Self.write(try XCTUnwrap(descriptor.descriptor), "written by the handler")
            }
            return nil
        }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        try port.remote.send(LoopMessage(id: 1, components: [.data(Array("hi".utf8)),
                                                             .descriptor(try MessageDescriptor(duplicating: ends.write))]))
        Kernel.close(ends.write) // the handler's copy is the one open write end now
        XCTAssertTrue(runCurrentLoop(in: mode) { received.count == 1 })
        XCTAssertNotEqual(received.first, ends.write)
        XCTAssertEqual(Self.read(ends.read), "written by the handler")
        XCTAssertEqual(Self.read(ends.read), "", "end of the pipe: the message's descriptor closed after the handler")
    }

    func testTenThousandDescriptorsPassedToAPortLeaveNoneOpen() throws {
        let mode = uniqueMode("ten-thousand")
        let ends = try Self.pipe()
        defer { Kernel.close(ends.read); Kernel.close(ends.write) }
        var handled = 0
        let port = try LocalPort(name: uniqueName("ten-thousand")) { message in
            handled += message.descriptors.count
            return nil
        }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        XCTAssertEqual(try Self.copies(ofPipe: ends.read), 2)
        for round in 0..<1000 {
            let descriptors = try (0..<10).map { _ in LoopMessage.Component.descriptor(try MessageDescriptor(duplicating: ends.write)) }
            try port.remote.send(LoopMessage(id: Int32(round), components: descriptors))
            if round % 50 == 49 { XCTAssertTrue(runCurrentLoop(in: mode) { handled == (round + 1) * 10 }) }
        }
        XCTAssertEqual(handled, 10_000)
        XCTAssertEqual(try Self.copies(ofPipe: ends.read), 2, "the two ends this test opened, and no copy")
        XCTAssertEqual(port.descriptorReceiver?.counters.taken, 10_000)
        XCTAssertEqual(port.descriptorReceiver?.unclaimedCount, 0)
    }

    func testAHandlerThatThrowsOrTakesItsDescriptorLeavesOnlyTheTakenOneOpen() throws {
        struct Refused: Error {}
        let mode = uniqueMode("throws")
        let ends = try Self.pipe()
        defer { Kernel.close(ends.read); Kernel.close(ends.write) }
        var taken: [Int32] = []
        var seen = 0
        let port = try LocalPort(name: uniqueName("throws")) { message in
            seen += 1
            if message.id == 1, let fd = message.descriptors.first?.take() { taken.append(fd) }
            throw Refused()
        }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        for id in Int32(0)..<100 {
            try port.remote.send(LoopMessage(id: id, components: [.descriptor(try MessageDescriptor(duplicating: ends.write))]))
        }
        XCTAssertTrue(runCurrentLoop(in: mode) { seen == 100 })
        XCTAssertEqual(port.statistics.handlerErrors, 100)
        XCTAssertEqual(taken.count, 1)
        XCTAssertEqual(try Self.copies(ofPipe: ends.read), 3, "the test's two ends and the one the handler took")
        taken.forEach(Kernel.close)
        XCTAssertEqual(try Self.copies(ofPipe: ends.read), 2)
    }

    func testInvalidatingAPortWithMessagesQueuedClosesTheirDescriptors() throws {
        let ends = try Self.pipe()
        defer { Kernel.close(ends.read) }
        let port = try LocalPort(name: uniqueName("queued")) { _ in nil } // never run: the messages stay queued
        for id in Int32(0)..<200 {
            try port.remote.send(LoopMessage(id: id, components: [.descriptor(try MessageDescriptor(duplicating: ends.write)),
                                                                  .descriptor(try MessageDescriptor(duplicating: ends.write))]))
        }
        Kernel.close(ends.write)
        XCTAssertEqual(try Self.copies(ofPipe: ends.read), 1, "the sender closed its copies: the 400 are in flight to the port")
        XCTAssertNil(Self.read(ends.read), "no end of file: write ends are open, in the port's side channel")
        port.invalidate()
        XCTAssertEqual(Self.read(ends.read), "", "end of file: no write end is open anywhere, in flight or received")
    }

    func testAPortInvalidatedByItsFirstHandlerClosesTheDescriptorsOfTheMessagesQueuedBehind() throws {
        let mode = uniqueMode("invalidated")
        let ends = try Self.pipe()
        defer { Kernel.close(ends.read) }
        var invalidate: () -> Void = {}
        var handled = 0
        let port = try LocalPort(name: uniqueName("invalidated")) { _ in
            handled += 1
            invalidate() // the other 199 messages are queued, their descriptors received with the first one's
            return nil
        }
        invalidate = { port.invalidate() }
        loop.add(port, to: mode)
        for id in Int32(0)..<200 {
            try port.remote.send(LoopMessage(id: id, components: [.descriptor(try MessageDescriptor(duplicating: ends.write))]))
        }
        Kernel.close(ends.write)
        XCTAssertTrue(runCurrentLoop(in: mode) { !port.isValid })
        XCTAssertEqual(handled, 1)
        XCTAssertEqual(try Self.copies(ofPipe: ends.read), 1)
        XCTAssertEqual(Self.read(ends.read), "", "end of file: the 199 queued messages' descriptors closed with the port")
    }

    func testDescriptorsSentFromOtherThreadsReachTheHandlerAndLeaveNoneOpen() throws {
        let mode = uniqueMode("threads")
        let ends = try Self.pipe()
        defer { Kernel.close(ends.read) }
        let name = uniqueName("threads")
        var handled = 0
        let port = try LocalPort(name: name) { message in
            for descriptor in message.descriptors {
                try Self.write(try XCTUnwrap(descriptor.descriptor), "t")
                handled += 1
            }
            return nil
        }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        let failures = LockedValue<[String]>([])
        let write = ends.write
        let threads = (0..<4).map { thread in
            TestThread {
                do {
                    let remote = try RemotePort(named: name)
                    for id in 0..<250 {
                        try remote.send(LoopMessage(id: Int32(thread * 1000 + id),
                                                    components: [.descriptor(try MessageDescriptor(duplicating: write))]))
                    }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        XCTAssertTrue(runCurrentLoop(in: mode) { handled == 1000 })
        threads.forEach { $0.join() }
        XCTAssertEqual(failures.withLock { $0 }, [])
        Kernel.close(ends.write)
        var bytes = 0
        while let text = Self.read(ends.read), !text.isEmpty { bytes += text.utf8.count }
        XCTAssertEqual(bytes, 1000)
        XCTAssertEqual(try Self.copies(ofPipe: ends.read), 1)
    }

    func testAMessageWithDescriptorsToATCPAddressIsRefusedWithATypedErrorBeforeItIsSent() throws {
        let mode = uniqueMode("tcp")
        var delivered = 0
        let port = try LocalPort { _ in delivered += 1; return nil }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        let address = try port.bind(tcp: "tcp://127.0.0.1:*")
        let ends = try Self.pipe()
        defer { Kernel.close(ends.read); Kernel.close(ends.write) }
        let remote = RemotePort(address)
        let message = LoopMessage(id: 7, components: [.descriptor(try MessageDescriptor(duplicating: ends.write))])
        XCTAssertThrowsError(try remote.send(message, timeout: .seconds(1))) { error in
            XCTAssertEqual(error as? PortError, .descriptorsToAnotherHost(address))
        }
        XCTAssertThrowsError(try port.send(message, timeout: .seconds(1)), "an unnamed port has no descriptor channel") { error in
            guard case .descriptorsNotSent = error as? PortError else { return XCTFail("\(error)") }
        }
        try remote.send(LoopMessage(id: 8, text: "after"), timeout: .seconds(5))
        XCTAssertTrue(runCurrentLoop(in: mode) { delivered == 1 }, "only the message without descriptors arrived")
    }

    func testAReplyWithADescriptorIsDroppedAndCountedAndItsDescriptorClosed() throws {
        let ends = try Self.pipe()
        defer { Kernel.close(ends.read) }
        let write = ends.write
        let port = try LocalPort(name: uniqueName("reply")) { _ in
            LoopMessage(id: 2, components: [.descriptor(MessageDescriptor(adopting: write))])
        }
        defer { port.invalidate() }
        let mode = uniqueMode("reply")
        loop.add(port, to: mode)
        let remote = port.remote
        let outcome = LockedValue<String?>(nil)
        let requester = TestThread {
            do {
                _ = try remote.sendRequest(LoopMessage(id: 1, text: "a pipe?"), receiveTimeout: .seconds(1))
                outcome.withLock { $0 = "replied" }
            } catch {
                outcome.withLock { $0 = "\(error)" }
            }
        }
        XCTAssertTrue(runCurrentLoop(in: mode) { port.statistics.repliesFailed == 1 },
                      "a requester has no side channel: the reply is not sent, and counted")
        requester.join()
        XCTAssertNotEqual(outcome.withLock { $0 }, "replied")
        XCTAssertEqual(Self.read(ends.read), "", "end of file: the reply's descriptor closed with it")
    }

    func testAForgedTokenIsACountedDropAndDeliversNothing() throws {
        let mode = uniqueMode("forged")
        var delivered: [Int32] = []
        let port = try LocalPort(name: uniqueName("forged")) { message in delivered.append(message.id); return nil }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        let raw = try ZMQSocket(type: .dealer)
        try raw.connect(port.remote.address.rawValue)
        let forged = WireMessage(messageID: 1, components: [.descriptor(token: DescriptorToken.random().bytes, index: 0)])
        let valid = WireCodec.encode(LoopMessage(id: 2).wire(kind: .message))
        let before = counters
        XCTAssertTrue(try raw.send(WireCodec.encode(forged), dontWait: false))
        XCTAssertTrue(try raw.send(valid, dontWait: false))
        XCTAssertTrue(runCurrentLoop(in: mode) { delivered == [2] })
        XCTAssertEqual(counters.messagesDropped[.unknownDescriptors]! - before.messagesDropped[.unknownDescriptors]!, 1)
        XCTAssertEqual(port.descriptorReceiver?.counters.unknownTokens, 1)
    }

    // MARK: - Between processes

    /// In the child: runs the scenario `<kind>:<port name>`.
    private static func runChild(_ scenario: String) -> Bool {
        let parts = scenario.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { return childReport(false, "no scenario in \(scenario)") }
        do {
            switch parts[0] {
            case "pipe": return try sendPipe(to: parts[1])
            case "many": return try sendTenThousand(to: parts[1])
            case "killed": return try attachAndWaitToBeKilled(to: parts[1])
            case "answered": return try attachAfterAnAnswerAndWaitToBeKilled(to: parts[1])
            default: return childReport(false, "unknown scenario \(parts[0])")
            }
        } catch {
            return childReport(false, "\(error)")
        }
    }

    /// Sends a pipe's read end to the port named `name`, the pipe holding "from the child",
    /// and ends.
    private static func sendPipe(to name: String) throws -> Bool {
        let ends = try pipe()
        try write(ends.write, "from the child")
        let remote = try RemotePort(named: name)
        try remote.send(LoopMessage(id: 1, components: [.descriptor(MessageDescriptor(adopting: ends.read))]),
                        timeout: .seconds(5))
        Kernel.close(ends.write)
        print("PID \(getpid())")
        return true
    }

    /// Sends a pipe's read end, then 10,000 copies of its write end (1,000 messages of 10),
    /// then a request whose reply says the port handled everything before it; reports the
    /// copies of the pipe open here before and after (the sender's side of the leak count).
    private static func sendTenThousand(to name: String) throws -> Bool {
        let ends = try pipe()
        let remote = try RemotePort(named: name)
        try remote.send(LoopMessage(id: 0, components: [.descriptor(try MessageDescriptor(duplicating: ends.read))]))
        let before = try copies(ofPipe: ends.write)
        for id in 1...1000 {
            let components = try (0..<10).map { _ in LoopMessage.Component.descriptor(try MessageDescriptor(duplicating: ends.write)) }
            try remote.send(LoopMessage(id: Int32(id), components: components), timeout: .seconds(20))
        }
        _ = try remote.sendRequest(LoopMessage(id: 1001, text: "done?"), receiveTimeout: .seconds(20))
        let after = try copies(ofPipe: ends.write)
        Kernel.close(ends.read)
        Kernel.close(ends.write)
        print("SENDER \(before) \(after)")
        return childReport(before == 2 && after == 2, "the sender's copies of its pipe: \(before) before, \(after) after")
    }

    /// Sends a pipe's read end, the pipe holding "from the child", then attaches its write
    /// end three times on the side channel without the messages that would name them (as a
    /// sender killed between the two would), says so, and waits to be killed.
    private static func attachAndWaitToBeKilled(to name: String) throws -> Bool {
        let ends = try pipe()
        try write(ends.write, "from the child")
        let remote = try RemotePort(named: name)
        try remote.send(LoopMessage(id: 1, components: [.descriptor(MessageDescriptor(adopting: ends.read))]))
        let socketPath = String(remote.address.rawValue.dropFirst("ipc://".count))
        let sender = try DescriptorSender(path: PortDirectory.Registration.descriptorPath(ofSocket: socketPath))
        for _ in 0..<3 { _ = try sender.attach([ends.write]) } // more packets than one read of each connection takes
        print("ATTACHED \(getpid())")
        fflush(nil)
        alarm(60) // the parent kills it long before; never outlive a parent that failed
        while true { pause() }
    }

    /// Sends a pipe's read end, the pipe holding "from the child", in a request; once it is
    /// answered (the port has taken everything it had read), attaches the write end three
    /// times on a connection of its own, which no message of the port then reads, without
    /// the messages that would name them; says so, and waits to be killed.
    private static func attachAfterAnAnswerAndWaitToBeKilled(to name: String) throws -> Bool {
        let ends = try pipe()
        try write(ends.write, "from the child")
        let remote = try RemotePort(named: name)
        _ = try remote.sendRequest(LoopMessage(id: 1, components: [.descriptor(MessageDescriptor(adopting: ends.read))]),
                                   receiveTimeout: .seconds(20))
        let socketPath = String(remote.address.rawValue.dropFirst("ipc://".count))
        let sender = try DescriptorSender(path: PortDirectory.Registration.descriptorPath(ofSocket: socketPath))
        for _ in 0..<3 { _ = try sender.attach([ends.write]) }
        print("ATTACHED \(getpid())")
        fflush(nil)
        alarm(60) // the parent kills it long before; never outlive a parent that failed
        while true { pause() }
    }

    func testAnotherProcessPassesAPipeThatTheHandlerReadsAfterTheSenderIsGone() throws {
        let mode = uniqueMode("child")
        let name = uniqueName("child")
        var texts: [String] = []
        var senders: [MessageSender?] = []
        let port = try LocalPort(name: name) { message in
            senders.append(message.sender)
            for descriptor in message.descriptors { texts.append(Self.read(descriptor.descriptor ?? -1) ?? "unreadable") }
            return nil
        }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        let report = try expectPassingChild(self, test: #function, variable: Self.scenarioVariable, scenario: "pipe:\(name)")
        let pid = try XCTUnwrap(report.split(separator: "\n").first { $0.hasPrefix("PID ") }.flatMap { Int32($0.dropFirst(4)) })
        XCTAssertTrue(runCurrentLoop(in: mode) { texts.count == 1 })
        XCTAssertEqual(texts, ["from the child"])
        XCTAssertEqual(senders, [.process(uid: getuid(), gid: getgid(), pid: pid)])
    }
}

extension PortDescriptorTests {
    private func childExecutableArguments(_ test: String) -> [String] {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        return [executable, "\(String(reflecting: type(of: self)))/\(test.hasSuffix("()") ? String(test.dropLast(2)) : test)"]
    }

    func testTenThousandDescriptorsFromAnotherProcessLeaveNoneOpenOnEitherSide() throws {
        let mode = uniqueMode("many-child")
        let name = uniqueName("many-child")
        var reader: Int32?
        var handled = 0
        var asked = false
        let port = try LocalPort(name: name) { message in
            if message.id == 0 { reader = message.descriptors.first?.take() }
            handled += message.descriptors.count
            guard message.id == 1001 else { return nil }
            asked = true
            return LoopMessage(id: 1001, text: "all handled")
        }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        let child = try SpawnedProcess(childExecutableArguments(#function),
                                       environment: [Self.scenarioVariable: "many:\(name)"])
        // The child's last message is a request: once it is handled, everything before it was.
        XCTAssertTrue(runCurrentLoop(in: mode, safetyNet: .seconds(60)) { asked },
                      "\(String(describing: port.descriptorReceiver?.counters)) \(counters.messagesDropped)")
        XCTAssertEqual(child.waitForExit(), .exited(0), child.stdout + child.stderr)
        XCTAssertTrue(child.stdout.contains("SENDER 2 2"), "the sender's copies of its pipe, before and after: \(child.stdout)")
        XCTAssertEqual(handled, 10_001)
        let read = try XCTUnwrap(reader)
        defer { Kernel.close(read) }
        XCTAssertEqual(try Self.copies(ofPipe: read), 1, "the receiver's side: only the read end its handler took")
        XCTAssertEqual(Self.read(read), "", "end of file: no copy of the write end is open in any process")
        XCTAssertEqual(port.descriptorReceiver?.counters.taken, 10_001)
    }

    /// Runs this thread's loop in `mode` until `condition` holds, at most `limit`. What a
    /// port's side channel watches (hang-ups, its timer) is upkeep, not a source: it never
    /// ends a run, so the loop runs in slices of 5 ms (each ended by its deadline), the
    /// condition looked at between them.
    private func runLoop(in mode: LoopMode, within limit: Duration, until condition: () -> Bool) -> Bool {
        waitUntil(within: limit) {
            _ = loop.run(mode: mode, until: .after(.milliseconds(5)), returnAfterSourceHandled: true)
            return condition()
        }
    }

    func testASenderKilledBetweenItsDescriptorsAndItsMessageLeavesNoneOpenOnceTheGraceHasRunWithoutAnotherMessage() throws {
        let mode = uniqueMode("killed")
        let name = uniqueName("killed")
        var taken: [Int32] = []
        var handled = 0
        let port = try LocalPort(name: name) { message in
            handled += 1
            if let fd = message.descriptors.first?.take() { taken.append(fd) }
            return nil
        }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        let grace = Duration.milliseconds(300)
        port.descriptorReceiver?.orphanGrace = grace
        let child = try SpawnedProcess(childExecutableArguments(#function),
                                       environment: [Self.scenarioVariable: "killed:\(name)"])
        XCTAssertNotNil(child.waitForFirstLine(containing: ["ATTACHED"]), child.stdout + child.stderr)
        XCTAssertTrue(runCurrentLoop(in: mode) { handled == 1 })
        XCTAssertEqual(kill(child.pid, SIGKILL), 0)
        guard case .signalled(SIGKILL, _) = child.waitForExit() else { return XCTFail("not killed: \(child.stdout)") }
        let killed = Deadline.now()
        let read = try XCTUnwrap(taken.first)
        defer { Kernel.close(read) }
        XCTAssertEqual(Self.read(read), "from the child")
        XCTAssertNil(Self.read(read), "no end of file: the write end the dead child attached waits in the port")
        // No other message comes: the idle loop sees the hang-up, and the grace runs out on its timer.
        XCTAssertTrue(runLoop(in: mode, within: .seconds(10)) { Self.read(read) == "" },
                      "end of file: every copy of the orphaned write end was closed, in the port and in flight")
        XCTAssertGreaterThanOrEqual(Deadline.now() - killed, grace, "not before the grace: its message could still come")
        XCTAssertEqual(try Self.copies(ofPipe: read), 1, "the receiver holds only the read end its handler took")
        XCTAssertEqual(port.descriptorReceiver?.counters.closedUnclaimed, 3)
        XCTAssertEqual(port.descriptorReceiver?.unclaimedCount, 0)
        taken.dropFirst().forEach(Kernel.close)
    }

    func testDescriptorsASenderAttachedOnAConnectionNoMessageReadAreClosedAfterItIsKilled() throws {
        let mode = uniqueMode("answered")
        let name = uniqueName("answered")
        var taken: [Int32] = []
        let port = try LocalPort(name: name) { message in
            if let fd = message.descriptors.first?.take() { taken.append(fd) }
            return LoopMessage(id: 2, text: "taken")
        }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        port.descriptorReceiver?.orphanGrace = .milliseconds(100)
        let child = try SpawnedProcess(childExecutableArguments(#function),
                                       environment: [Self.scenarioVariable: "answered:\(name)"])
        XCTAssertTrue(runCurrentLoop(in: mode) { taken.count == 1 })
        // The loop does not run meanwhile: the child's new connection waits in the listener's backlog.
        XCTAssertNotNil(child.waitForFirstLine(containing: ["ATTACHED"]), child.stdout + child.stderr)
        XCTAssertEqual(kill(child.pid, SIGKILL), 0)
        guard case .signalled(SIGKILL, _) = child.waitForExit() else { return XCTFail("not killed: \(child.stdout)") }
        let read = try XCTUnwrap(taken.first)
        defer { Kernel.close(read) }
        XCTAssertEqual(Self.read(read), "from the child")
        XCTAssertNil(Self.read(read), "no end of file: the attached write ends are in the side channel's queue")
        XCTAssertTrue(runLoop(in: mode, within: .seconds(10)) { Self.read(read) == "" },
                      "end of file: the connection was accepted, read to its end and its descriptors closed")
        XCTAssertEqual(port.descriptorReceiver?.counters.closedUnclaimed, 3)
        XCTAssertEqual(try Self.copies(ofPipe: read), 1)
    }

    func testAFloodOfDescriptorPacketsWithoutMessagesFromALiveSenderIsBoundedAndClosedAfterItsLifetime() throws {
        let mode = uniqueMode("flood")
        var handled = 0
        let port = try LocalPort(name: uniqueName("flood")) { _ in handled += 1; return nil }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        let receiver = try XCTUnwrap(port.descriptorReceiver)
        let ends = try Self.pipe()
        defer { Kernel.close(ends.read) }
        // A live sender of this user that attaches and never sends a message: 2,048 copies of
        // the write end, 8 a packet, read by the port as it reads ahead for other messages.
        let socketPath = String(port.remote.address.rawValue.dropFirst("ipc://".count))
        let hostile = try DescriptorSender(path: PortDirectory.Registration.descriptorPath(ofSocket: socketPath))
        for packet in 1...256 {
            _ = try hostile.attach(Array(repeating: ends.write, count: 8), before: .after(.seconds(10)))
            if packet % 16 == 0 { receiver.drain() } // few in flight at a time (the kernel bounds a user's)
        }
        Kernel.close(ends.write)
        XCTAssertEqual(receiver.unclaimedCount, receiver.maxUnclaimedPerConnection, "bounded in count")
        XCTAssertEqual(receiver.counters.overBound, 2_048 - receiver.maxUnclaimedPerConnection)
        XCTAssertEqual(try Self.copies(ofPipe: ends.read), 1 + receiver.maxUnclaimedPerConnection)
        // And in time: past their lifetime the port's timer closes them, the sender still alive.
        receiver.unclaimedLifetime = .milliseconds(200)
        XCTAssertTrue(runLoop(in: mode, within: .seconds(10)) { Self.read(ends.read) == "" },
                      "end of file: no copy of the write end is left")
        XCTAssertEqual(receiver.counters.expired, receiver.maxUnclaimedPerConnection)
        XCTAssertEqual(receiver.counters.closedUnclaimed, 2_048)
        XCTAssertEqual(try Self.copies(ofPipe: ends.read), 1)
        XCTAssertEqual(handled, 0)
        withExtendedLifetime(hostile) {}
    }
}
