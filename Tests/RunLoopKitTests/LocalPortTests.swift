import CZeroMQ
import Dispatch
import Foundation
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopWire
import RunLoopZMQ
import XCTest

final class LocalPortTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    func testAMessageFromAnotherThreadReachesTheHandlerOnTheOwnerThread() throws {
        var received: [LoopMessage] = []
        var onOwnerThread = false
        let port = try LocalPort { message in
            received.append(message)
            onOwnerThread = ThreadRunLoop.current === self.loop
            return nil
        }
        loop.add(port, to: .default)
        TestThread {
            do { try port.send(LoopMessage(id: 7, text: "hello")) } catch { XCTFail("\(error)") }
        }.join()
        XCTAssertEqual(loop.run(mode: .default, timeout: .seconds(20), returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(received.map(\.id), [7])
        XCTAssertEqual(received.first?.text, "hello")
        XCTAssertTrue(onOwnerThread)
        XCTAssertEqual(port.statistics.messagesReceived, 1)
        port.invalidate()
    }

    func testABurstQueuedBeforeTheLoopRunsIsDeliveredInFull() throws {
        var count = 0
        let port = try LocalPort { _ in count += 1; return nil }
        let burst = 10_000
        TestThread {
            for index in 0..<burst {
                do { try port.send(LoopMessage(id: Int32(index)), timeout: .zero) } catch { return XCTFail("\(error)") }
            }
        }.join()
        loop.add(port, to: .default) // the edge already passed before the port joined the poll set
        XCTAssertTrue(runCurrentLoop { count == burst }, "delivered \(count) of \(burst)")
        port.invalidate()
    }

    func testMessagesArrivingDuringAHandlerAreDeliveredWithoutAnotherWakeUp() throws {
        var count = 0
        let sentDuringHandler = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let portBox = LockedValue<LocalPort?>(nil)
        let port = try LocalPort { _ in
            count += 1
            if count == 1 {
                go.signal()
                sentDuringHandler.wait() // the other 99 are queued while this handler runs
            }
            return nil
        }
        portBox.withLock { $0 = port }
        loop.add(port, to: .default)
        let sender = TestThread {
            let port = portBox.withLock { $0 }!
            try? port.send(LoopMessage(id: 0))
            go.wait()
            for index in 1..<100 { try? port.send(LoopMessage(id: Int32(index))) }
            sentDuringHandler.signal()
        }
        XCTAssertTrue(runCurrentLoop { count == 100 }, "delivered \(count) of 100")
        sender.join()
        port.invalidate()
    }

    func testAMillionMessagesFromFourThreadsAreAllDeliveredInEachSendersOrder() throws {
        let perSender = (ProcessInfo.processInfo.environment["RUNLOOPKIT_STRESS_MESSAGES"].flatMap(Int.init) ?? 1_000_000) / 4
        var next = [Int](repeating: 0, count: 4)
        var outOfOrder = 0
        var total = 0
        let port = try LocalPort { message in
            let sender = Int(message.id)
            let sequence = message.data.first.map { $0.withUnsafeBytes { Int($0.loadUnaligned(as: UInt32.self)) } } ?? -1
            if sequence != next[sender] { outOfOrder += 1 }
            next[sender] = sequence + 1
            total += 1
            return nil
        }
        loop.add(port, to: .default)
        let senders = (0..<4).map { sender in
            TestThread {
                for sequence in 0..<perSender {
                    let bytes = withUnsafeBytes(of: UInt32(sequence)) { Array($0) }
                    do {
                        try port.send(LoopMessage(id: Int32(sender), components: [.data(bytes)]), timeout: .seconds(60))
                    } catch {
                        XCTFail("send failed: \(error)")
                        return
                    }
                }
            }
        }
        // A safety net only: on a loaded 2-core machine a debug build needs well over 20 s.
        XCTAssertTrue(runCurrentLoop(safetyNet: .seconds(600)) { total == 4 * perSender }, "delivered \(total) of \(4 * perSender)")
        port.invalidate() // should the net ever catch, the senders fail fast instead of outliving the test
        for sender in senders { sender.join() }
        XCTAssertEqual(outOfOrder, 0)
        XCTAssertEqual(next, [perSender, perSender, perSender, perSender])
    }

    func testAPortSentInAMessageArrivesAsAPortTheReceiverCanSendTo() throws {
        var workerPort: RemotePort?
        var answers: [String] = []
        let mainPort = try LocalPort { message in
            if message.id == 100 { workerPort = message.ports.first }
            if message.id == 2 { answers.append(message.text ?? "?") }
            return nil
        }
        loop.add(mainPort, to: .default)
        let worker = LoopThread { loop in
            let port = try! LocalPort { message in
                try? mainPort.send(LoopMessage(id: 2, text: "echo \(message.text ?? "")"))
                return nil
            }
            loop.add(port, to: .default)
            try! mainPort.send(LoopMessage(id: 100, components: [.port(port.remote)]))
        }
        XCTAssertTrue(runCurrentLoop { workerPort != nil })
        try workerPort!.send(LoopMessage(id: 1, text: "job"))
        XCTAssertTrue(runCurrentLoop { !answers.isEmpty })
        XCTAssertEqual(answers, ["echo job"])
        worker.stop()
        mainPort.invalidate()
    }

    func testAPortOnlyDeliversInItsModes() throws {
        var count = 0
        let port = try LocalPort { _ in count += 1; return nil }
        loop.add(port, to: "port-mode")
        let keepAlive = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(keepAlive, to: .default)
        try port.send(LoopMessage(id: 1))
        XCTAssertEqual(loop.run(mode: .default, timeout: .milliseconds(30), returnAfterSourceHandled: true), .timedOut)
        XCTAssertEqual(count, 0, "held while the loop runs another mode")
        XCTAssertEqual(loop.run(mode: "port-mode", timeout: .seconds(20), returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(count, 1)
        keepAlive.invalidate()
        port.invalidate()
    }

    func testAMessageHeldForAnotherModeDoesNotKeepWakingTheLoop() throws {
        var count = 0
        let port = try LocalPort { _ in count += 1; return nil }
        loop.add(port, to: "held-mode")
        let keepAlive = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(keepAlive, to: .default)
        var wakeUps = 0
        let observer = LoopObserver(activities: .afterWaiting) { _, _ in wakeUps += 1 }
        loop.add(observer, to: .default)
        let sent = DispatchSemaphore(value: 0)
        let sender = TestThread {
            try? port.remote.send(LoopMessage(id: 1))
            sent.signal()
        }
        sent.wait()
        let before = threadCPUTime()
        XCTAssertEqual(loop.run(mode: .default, timeout: .milliseconds(300), returnAfterSourceHandled: false), .timedOut)
        let spent = threadCPUTime() - before
        // libzmq may signal the new pipe and the message separately; spinning would be thousands.
        XCTAssertLessThanOrEqual(wakeUps, 5, "the held port's descriptor does not keep waking the loop")
        XCTAssertLessThan(spent, .milliseconds(20), "no spinning while the message waits for its mode")
        XCTAssertEqual(count, 0)
        XCTAssertEqual(loop.run(mode: "held-mode", timeout: .seconds(20), returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(count, 1, "and it is delivered when its mode runs")
        sender.join()
        observer.invalidate()
        keepAlive.invalidate()
        port.invalidate()
    }

    func testInvalidatingAPortRemovesItFromItsLoopAndSendersTimeOut() throws {
        let port = try LocalPort { _ in nil }
        loop.add(port, to: .default)
        loop.add(port, to: "other")
        let cachedSender = TestThread { try? port.remote.send(LoopMessage(id: 0)) } // connects while open
        cachedSender.join()
        port.invalidate()
        XCTAssertFalse(loop.contains(port, in: .default))
        XCTAssertFalse(loop.contains(port, in: "other"))
        XCTAssertThrowsError(try port.send(LoopMessage(id: 1))) { XCTAssertEqual($0 as? PortError, .invalidated) }
        XCTAssertThrowsError(try RemotePort(port.inProcessAddress).send(LoopMessage(id: 1), timeout: .seconds(10))) {
            XCTAssertEqual($0 as? PortError, .remoteInvalid(port.inProcessAddress), "known closed: no wait, no silent queueing")
        }
        let failure = LockedValue<PortError?>(nil)
        TestThread { // this thread's socket was connected before the port closed
            do { try port.remote.send(LoopMessage(id: 1), timeout: .seconds(10)) } catch { failure.withLock { $0 = error as? PortError } }
        }.join()
        XCTAssertEqual(failure.withLock { $0 }, .remoteInvalid(port.inProcessAddress))
    }

    func testAHandlerMayInvalidateItsOwnPortAndAddAnother() throws {
        var replacement: LocalPort?
        var got: [Int32] = []
        var port: LocalPort!
        port = try LocalPort { [loop] message in
            got.append(message.id)
            port.invalidate()
            replacement = try? LocalPort { message in got.append(message.id); return nil }
            loop.add(replacement!, to: .default)
            return nil
        }
        loop.add(port, to: .default)
        try port.send(LoopMessage(id: 1))
        XCTAssertTrue(runCurrentLoop { replacement != nil })
        XCTAssertFalse(loop.contains(port, in: .default))
        try replacement!.send(LoopMessage(id: 2))
        XCTAssertTrue(runCurrentLoop { got == [1, 2] })
        replacement!.invalidate()
    }

    func testAHandlerThatThrowsIsReportedAndTheLoopGoesOn() throws {
        struct Refused: Error, Equatable { let id: Int32 }
        var handled: [Int32] = []
        var reported: [(Refused?, Int32)] = []
        let port = try LocalPort { message in
            if message.id == 2 || message.id == 7 { throw Refused(id: message.id) }
            handled.append(message.id)
            return LoopMessage(id: 0, text: "ok")
        }
        port.onHandlerError = { error, message in reported.append((error as? Refused, message.id)) }
        loop.add(port, to: .default)
        for id: Int32 in 1...3 { try port.send(LoopMessage(id: id)) }
        XCTAssertTrue(runCurrentLoop { handled == [1, 3] }, "the loop went on after the throw")
        XCTAssertEqual(reported.map(\.0), [Refused(id: 2)])
        XCTAssertEqual(port.statistics.handlerErrors, 1)
        // A request whose handler throws: the failure comes back in place of the reply, so
        // the requester learns of it within the round trip (a timeout here would take 60 s
        // and be `receiveTimedOut`).
        let failure = LockedValue<PortError?>(nil)
        let requester = TestThread {
            do { _ = try port.remote.sendRequest(LoopMessage(id: 7), sendTimeout: .seconds(5), receiveTimeout: .seconds(60)) }
            catch { failure.withLock { $0 = error as? PortError } }
        }
        XCTAssertTrue(runCurrentLoop { reported.count == 2 })
        requester.join()
        XCTAssertEqual(failure.withLock { $0 }, .remoteHandlerFailed(port.remote.address, reason: "Refused(id: 7)"))
        port.invalidate()
    }

    func testAnAsyncRequestWhoseHandlerThrowsFailsWithTheHandlersReason() async throws {
        struct NoSuchJob: Error, CustomStringConvertible { var description: String { "no such job: 42" } }
        let server = LoopThread { loop in
            let port = try! LocalPort(name: "failing-\(getpid())") { _ in throw NoSuchJob() }
            loop.add(port, to: .default)
        }
        defer { server.stop() }
        let remote = try RemotePort(named: "failing-\(getpid())")
        do {
            _ = try await remote.request(LoopMessage(id: 3), receiveTimeout: .seconds(60))
            XCTFail("the request succeeded")
        } catch let error as PortError {
            XCTAssertEqual(error, .remoteHandlerFailed(remote.address, reason: "no such job: 42"))
        }
    }

    func testAFailureReplySaysAtMostAKibibyteCutAtACharacterBoundary() {
        struct Long: Error, CustomStringConvertible { var description: String { String(repeating: "é", count: 600) } }
        let reason = LocalPort.failureReason(Long())
        XCTAssertEqual(reason, String(repeating: "é", count: 512), "two bytes a character, cut between characters")
        struct Short: Error {}
        XCTAssertEqual(LocalPort.failureReason(Short()), "Short()")
    }

    func testInvalidatingFromAnotherThreadClosesThePortOnItsOwnThread() throws {
        let port = try LocalPort { _ in nil }
        loop.add(port, to: .default)
        let keepAlive = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(keepAlive, to: .default)
        TestThread { port.invalidate() }.join()
        XCTAssertTrue(loop.contains(port, in: .default), "closing waits for the owner thread")
        _ = loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: false)
        XCTAssertFalse(loop.contains(port, in: .default))
        keepAlive.invalidate()
    }

    func testMalformedFramesFromARawSocketAreDroppedAndCountedAndTheLoopGoesOn() throws {
        var delivered: [Int32] = []
        let port = try LocalPort { message in delivered.append(message.id); return nil }
        loop.add(port, to: .default)
        let raw = try ZMQSocket(type: .dealer)
        try raw.connect(port.inProcessAddress.rawValue)
        let valid = WireCodec.encode(LoopMessage(id: 42).wire(kind: .message))
        var badVersion = valid
        badVersion[0][3] = 99
        var truncated = valid
        truncated[0] = Array(truncated[0].prefix(5))
        let malformed: [[[UInt8]]] = [
            [[1, 2, 3]],                                   // not a header
            truncated,                                     // truncated header
            badVersion,                                    // unknown version
            [valid[0] + [0]],                              // a byte past what the header announces
            valid + [[0]],                                 // extra frame
            WireCodec.encode(WireMessage(kind: .message, messageID: 1, correlationID: 0, replyAddress: nil,
                                         components: [.port(address: "file:///etc/passwd")])), // a port that is no endpoint
        ]
        for frames in malformed { XCTAssertTrue(try raw.send(frames, dontWait: false)) }
        XCTAssertTrue(try raw.send(valid, dontWait: false))
        XCTAssertTrue(runCurrentLoop { delivered == [42] })
        XCTAssertEqual(port.statistics.messagesDropped, malformed.count)
        XCTAssertEqual(port.statistics.messagesReceived, 1)
        port.invalidate()
    }

    /// `messagesReceived` counts what reached the handler: a reply or failure sent to a
    /// port (replies come back on the requester's connection, never to a port) is dropped
    /// as late and counted in `messagesDropped` only, by an owned and by a borrowing handler.
    func testRepliesAndFailuresSentToAPortAreCountedAsDroppedNotAsReceived() throws {
        for borrowing in [false, true] {
            var delivered: [Int32] = []
            let port = try LocalPort()
            if borrowing {
                port.handler = .borrowing { message in delivered.append(message.id); return nil }
            } else {
                port.handler = .returning { message in delivered.append(message.id); return nil }
            }
            loop.add(port, to: .default)
            let before = loop.counters.messagesDropped[.lateReply]!
            let raw = try ZMQSocket(type: .dealer)
            try raw.connect(port.inProcessAddress.rawValue)
            for kind in [WireKind.reply, .failure] {
                XCTAssertTrue(try raw.send(WireCodec.encode(LoopMessage(id: 7).wire(kind: kind, correlationID: 99)), dontWait: false))
            }
            XCTAssertTrue(try raw.send(WireCodec.encode(LoopMessage(id: 42).wire(kind: .message)), dontWait: false))
            XCTAssertTrue(runCurrentLoop { delivered == [42] }, "borrowing: \(borrowing)")
            XCTAssertEqual(port.statistics.messagesReceived, 1, "the message alone reached the handler (borrowing: \(borrowing))")
            XCTAssertEqual(port.statistics.messagesDropped, 2, "borrowing: \(borrowing)")
            XCTAssertEqual(loop.counters.messagesDropped[.lateReply]! - before, 2, "borrowing: \(borrowing)")
            port.invalidate()
        }
    }

    /// A port without a handler drops what it receives: nothing reached a handler.
    func testAMessageToAPortWithoutAHandlerIsCountedAsDroppedNotAsReceived() throws {
        let port = try LocalPort()
        loop.add(port, to: .default)
        let before = loop.counters.messagesDropped[.noHandler]!
        try port.send(LoopMessage(id: 1))
        // A drop is no handled source, so a run would not return for it: short slices.
        let limit = Deadline.after(.seconds(20))
        while loop.counters.messagesDropped[.noHandler]! == before && Deadline.now() < limit {
            _ = loop.run(mode: .default, before: .after(.milliseconds(20)))
        }
        XCTAssertEqual(loop.counters.messagesDropped[.noHandler]! - before, 1)
        XCTAssertEqual(port.statistics.messagesReceived, 0)
        XCTAssertEqual(port.statistics.messagesDropped, 1)
        port.invalidate()
    }
}
