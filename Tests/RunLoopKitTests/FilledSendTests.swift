import Dispatch
import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopWire
import XCTest

/// `RemotePort.send(id:byteCount:timeout:filling:)`: the sender writes the payload in place,
/// in the frame libzmq sends, and the receiver gets exactly what it wrote, as the message
/// `send(LoopMessage(id:components: [.data(bytes)]))` sends; below 64 KiB in the message
/// frame, from 64 KiB on in a frame of its own. A size under 1 or over the wire's limit is
/// refused before anything happens; a closure that throws sends nothing and leaks nothing.
final class FilledSendTests: XCTestCase {
    static let scenarioVariable = "RUNLOOPKIT_FILLED_SEND_SCENARIO"
    /// Each side of the wire format's own-frame threshold (64 KiB), a small and a large payload.
    static let sizes = [16, (64 << 10) - 1, 64 << 10, 1 << 20]

    private struct FillFailure: Error, Equatable { let size: Int }

    override func setUp() {
        super.setUp()
        guard let scenario = childScenario(Self.scenarioVariable) else { return }
        endChild { Self.sendEverySize(to: scenario) }
    }

    private func uniqueName(_ base: String) -> String { "\(base)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))" }

    /// Byte `index` of the payload of `size` bytes: no two sizes, and no two nearby bytes, alike.
    private static func byte(_ index: Int, of size: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: index &* 131 &+ (index >> 8) &+ size)
    }

    private static func payload(_ size: Int) -> [UInt8] { (0..<size).map { byte($0, of: size) } }

    /// Writes the payload of `buffer.count` bytes into `buffer`, byte by byte.
    private static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        for index in buffer.indices { buffer[index] = byte(index, of: buffer.count) }
    }

    /// Sends each of `sizes` filled in place, with the size's index as id.
    private static func sendEverySize(_ remote: RemotePort) throws(PortFillError<Never>) {
        for (index, size) in sizes.enumerated() {
            try remote.send(id: Int32(index), byteCount: size, timeout: .seconds(20)) { fill($0) }
        }
    }

    /// In the child: sends every size to the port named `name`, and ends.
    private static func sendEverySize(to name: String) -> Bool {
        do {
            try sendEverySize(try RemotePort(named: name))
            return childReport(true, "sent \(sizes)")
        } catch {
            return childReport(false, "\(error)")
        }
    }

    /// Receives `sizes.count` messages on `port` (whose handler appends to `received`) and
    /// checks each is what `send(LoopMessage(…))` would have sent.
    private func assertEverySizeArrivedIntact(_ received: () -> [LoopMessage], on port: LocalPort,
                                              file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(runCurrentLoop(safetyNet: .seconds(60)) { received().count == Self.sizes.count },
                      "\(received().count) of \(Self.sizes.count) messages", file: file, line: line)
        let messages = received()
        XCTAssertEqual(messages.map(\.id), Array(0..<Int32(Self.sizes.count)), file: file, line: line)
        for (message, size) in zip(messages, Self.sizes) {
            XCTAssertEqual(message.data.map(\.count), [size], file: file, line: line)
            XCTAssertTrue(message == LoopMessage(id: message.id, components: [.data(Self.payload(size))]),
                          "the \(size) bytes arrived as written, as the one-component message", file: file, line: line)
            XCTAssertNil(message.replyPort, file: file, line: line)
        }
        XCTAssertEqual(port.statistics.messagesDropped, 0, file: file, line: line)
    }

    func testBytesFilledInPlaceArriveIntactOverInProcessOnEachSideOfTheOwnFrameThreshold() throws {
        var received: [LoopMessage] = []
        let port = try LocalPort { message in received.append(message); return nil }
        defer { port.invalidate() }
        ThreadRunLoop.current.add(port, to: .default)
        let failure = LockedValue<String?>(nil)
        let sender = TestThread { [remote = port.remote] in
            do throws(PortFillError<Never>) { try Self.sendEverySize(remote) } catch { failure.withLock { $0 = "\(error)" } }
        }
        assertEverySizeArrivedIntact({ received }, on: port)
        sender.join()
        XCTAssertNil(failure.withLock { $0 })
    }

    func testBytesFilledInPlaceInAnotherProcessArriveIntactOverIPC() throws {
        var received: [LoopMessage] = []
        let name = uniqueName("filled")
        let port = try LocalPort(name: name) { message in received.append(message); return nil }
        defer { port.invalidate() }
        ThreadRunLoop.current.add(port, to: .default)
        let child = try SpawnedProcess(childTestArguments(self, test: #function),
                                       environment: [Self.scenarioVariable: name])
        assertEverySizeArrivedIntact({ received }, on: port)
        XCTAssertEqual(child.waitForExit(), .exited(0), child.stdout + child.stderr)
    }

    func testAClosureThatThrowsSendsNothingLeaksNothingAndItsErrorComesBackAsThrown() throws {
        var received: [LoopMessage] = []
        let port = try LocalPort { message in received.append(message); return nil }
        defer { port.invalidate() }
        ThreadRunLoop.current.add(port, to: .default)
        let outcome = LockedValue<(errors: [PortFillError<FillFailure>], calls: Int, growth: Int)>(([], 0, 0))
        let sizes = [16, 1024] + Self.sizes.dropFirst()
        let rounds = 64
        TestThread { [remote = port.remote] in
            func throwingRound() {
                for size in sizes {
                    do throws(PortFillError<FillFailure>) {
                        try remote.send(id: 1, byteCount: size) { (buffer) throws(FillFailure) in
                            outcome.withLock { $0.calls += 1 }
                            Self.fill(buffer)
                            throw FillFailure(size: buffer.count)
                        }
                    } catch {
                        outcome.withLock { $0.errors.append(error) }
                    }
                }
            }
            throwingRound() // the connection and the frame pool's buffers made
            let before = Self.heapInUse()
            for _ in 0..<rounds { throwingRound() }
            outcome.withLock { $0.growth = Self.heapInUse() - before }
            // Then one message that arrives: the first the port gets, so nothing came before it.
            try! remote.send(id: 2, byteCount: 8) { $0.copyBytes(from: Array("arrived!".utf8)) }
        }.join()
        XCTAssertTrue(runCurrentLoop { !received.isEmpty })
        XCTAssertEqual(received, [LoopMessage(id: 2, components: [.data(Array("arrived!".utf8))])])
        XCTAssertEqual(port.statistics.messagesReceived, 1, "the port saw none of the failed sends")
        XCTAssertEqual(port.statistics.messagesDropped, 0)
        let (errors, calls, growth) = outcome.withLock { $0 }
        XCTAssertEqual(calls, sizes.count * (rounds + 1), "each closure ran once")
        XCTAssertEqual(errors, Array(Array(repeating: sizes.map { PortFillError.filling(FillFailure(size: $0)) }, count: rounds + 1).joined()))
        // A frame kept after its closure threw would hold 1 MiB + 64 KiB + 64 KiB a round, filled.
        XCTAssertLessThan(growth, 16 << 20, "\(growth) bytes more in use after \(rounds) rounds of throwing closures")
    }

    /// The allocator's bytes in use: every frame kept would add its size.
    private static func heapInUse() -> Int { heapBytesInUse() }

    func testASizeUnderOneOrOverTheWireLimitIsRefusedWithATypedErrorBeforeTheClosureRunsOrAConnectionIsMade() throws {
        let port = try LocalPort()
        defer { port.invalidate() }
        let limit = WireLimits.default.maxFrameBytes
        let outcome = LockedValue<(errors: [PortFillError<Never>], calls: Int, connections: Int)>(([], 0, -1))
        TestThread { [remote = port.remote] in
            for size in [limit + 1, 0, -1] {
                do throws(PortFillError<Never>) {
                    try remote.send(id: 1, byteCount: size) { _ in outcome.withLock { $0.calls += 1 } }
                } catch {
                    outcome.withLock { $0.errors.append(error) }
                }
            }
            outcome.withLock { $0.connections = ThreadPortState.current.connectionCount }
        }.join()
        let (errors, calls, connections) = outcome.withLock { $0 }
        XCTAssertEqual(errors, [.port(.messageTooLarge(size: limit + 1, limit: limit)), .invalidByteCount(0), .invalidByteCount(-1)])
        XCTAssertEqual(calls, 0, "no closure ran")
        XCTAssertEqual(connections, 0, "refused before any connection was made")
        XCTAssertEqual(port.statistics.messagesReceived, 0)
    }

    /// The port's queue full (it is not read), a filled send that may not wait fails with
    /// `sendTimedOut` and leaves nothing half sent, in the message frame or in a frame of its
    /// own; one that waits is sent, as filled, once the port reads: its message frame (a
    /// pooled buffer, which a failed attempt used to release) was kept between the attempts.
    /// Each closure runs once.
    func testAFilledSendToAFullPortTimesOutWholeOrWaitsAndArrivesAsFilledOnce() throws {
        var received: [LoopMessage] = []
        let port = try LocalPort(receiveHighWaterMark: 1) { message in received.append(message); return nil }
        defer { port.invalidate() }
        ThreadRunLoop.current.add(port, to: .default)
        let state = LockedValue<(queued: Int, refused: [PortFillError<Never>], waiting: Bool, calls: Int, failure: String?)>(
            (0, [], false, 0, nil))
        let sender = TestThread { [remote = port.remote] in
            do throws(PortFillError<Never>) {
                while true { // until the queue is full
                    let id = Int32(state.withLock { $0.queued })
                    do throws(PortFillError<Never>) {
                        try remote.send(id: id, byteCount: 16, timeout: .zero) { buffer in
                            buffer.storeBytes(of: id, as: Int32.self)
                            buffer.storeBytes(of: 0, toByteOffset: 4, as: UInt32.self)
                            buffer.storeBytes(of: 0, toByteOffset: 8, as: UInt64.self)
                            state.withLock { $0.calls += 1 }
                        }
                    } catch .port(.sendTimedOut) {
                        state.withLock { $0.refused.append(.port(.sendTimedOut(remote.address))) }
                        break
                    }
                    state.withLock { $0.queued += 1 }
                }
                do throws(PortFillError<Never>) { // a frame of its own, refused with its message frame
                    try remote.send(id: -2, byteCount: 64 << 10, timeout: .zero) { buffer in
                        Self.fill(buffer)
                        state.withLock { $0.calls += 1 }
                    }
                } catch {
                    state.withLock { $0.refused.append(error) }
                }
                try remote.send(id: -1, byteCount: 1024, timeout: .seconds(30)) { buffer in
                    Self.fill(buffer)
                    // The port reads once this is set, and takes a message again only once it
                    // read half its queue, well after the first attempt, which fails.
                    state.withLock { $0.calls += 1; $0.waiting = true }
                }
            } catch {
                state.withLock { $0.failure = "\(error)" }
            }
        }
        XCTAssertTrue(waitUntil(within: .seconds(60)) { state.withLock { $0.waiting } }, "the port's queue never filled")
        XCTAssertTrue(runCurrentLoop(safetyNet: .seconds(60)) { received.last?.id == -1 })
        sender.join()
        let (queued, refused, _, calls, failure) = state.withLock { $0 }
        XCTAssertNil(failure)
        XCTAssertEqual(refused, Array(repeating: .port(.sendTimedOut(port.remote.address)), count: 2))
        XCTAssertEqual(calls, queued + 3, "each closure ran once, the refused sends' too")
        XCTAssertEqual(received.count, queued + 1, "the refused messages were not sent")
        XCTAssertEqual(received.dropLast().map(\.id), Array(0..<Int32(queued)))
        XCTAssertTrue(received.dropLast().allSatisfy { $0 == LoopMessage(id: $0.id, components: [.data(Self.idBytes($0.id))]) })
        XCTAssertTrue(received.last == LoopMessage(id: -1, components: [.data(Self.payload(1024))]))
    }

    /// What the queue-filling sends write: their id, then 12 zero bytes.
    private static func idBytes(_ id: Int32) -> [UInt8] {
        withUnsafeBytes(of: id, Array.init) + [UInt8](repeating: 0, count: 12)
    }
}
