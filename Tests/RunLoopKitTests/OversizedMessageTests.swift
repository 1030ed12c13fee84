import Dispatch
import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopWire
import XCTest

/// A message over the wire format's limit per frame (64 MiB) is refused at the sender
/// with `messageTooLarge`, never sent for the receiver to drop unseen (over ipc and tcp,
/// libzmq's `ZMQ_MAXMSGSIZE` would close the connection without a word).
final class OversizedMessageTests: XCTestCase {
    private static let limit = WireLimits.default.maxFrameBytes

    func testAMessageOverTheWireLimitToAnotherProcessOverIPCIsRefusedAndOneAtTheLimitArrives() throws {
        try assertRefusedOverTheLimitAndDeliveredAtIt(tcp: false)
    }

    func testAMessageOverTheWireLimitToAnotherProcessOverTCPIsRefusedAndOneAtTheLimitArrives() throws {
        try assertRefusedOverTheLimitAndDeliveredAtIt(tcp: true)
    }

    func testASendOverTheWireLimitThrowsMessageTooLargeAtOnce() throws {
        let port = try LocalPort()
        defer { port.invalidate() }
        let limit = Self.limit
        let outcome = LockedValue<(error: PortError?, connections: Int)>((nil, -1))
        TestThread { [remote = port.remote] in // a thread with no connection yet
            let big = LoopMessage(id: 1, components: [.data([1]), .data([UInt8](repeating: 0, count: limit + 1))])
            do throws(PortError) {
                try remote.send(big, timeout: .seconds(30))
            } catch {
                outcome.withLock { $0.error = error }
            }
            outcome.withLock { $0.connections = ThreadPortState.current.connectionCount }
        }.join()
        XCTAssertEqual(outcome.withLock { $0.error }, .messageTooLarge(size: limit + 1, limit: limit))
        XCTAssertEqual(outcome.withLock { $0.connections }, 0, "refused before any connection was made")
    }

    func testBytesOverTheWireLimitAreRefusedAtOnceLikeTheMessageThatWouldHoldThem() throws {
        let port = try LocalPort()
        defer { port.invalidate() }
        let limit = Self.limit
        let outcome = LockedValue<(error: PortError?, connections: Int)>((nil, -1))
        TestThread { [remote = port.remote] in
            let big = [UInt8](repeating: 0, count: limit + 1)
            do {
                try big.withUnsafeBytes { try remote.send(id: 1, bytes: $0, timeout: .seconds(30)) }
            } catch {
                outcome.withLock { $0.error = error as? PortError }
            }
            outcome.withLock { $0.connections = ThreadPortState.current.connectionCount }
        }.join()
        XCTAssertEqual(outcome.withLock { $0.error }, .messageTooLarge(size: limit + 1, limit: limit))
        XCTAssertEqual(outcome.withLock { $0.connections }, 0, "refused before any connection was made")
    }

    func testAReplyOverTheWireLimitIsCountedAsNotSentAndTheRequesterTimesOut() throws {
        let limit = Self.limit
        let server = LoopThread()
        let made = LockedValue<LocalPort?>(nil)
        let ready = DispatchSemaphore(value: 0)
        server.loop.perform {
            let port = try! LocalPort { _ in LoopMessage(id: 2, components: [.data([UInt8](repeating: 0, count: limit + 1))]) }
            ThreadRunLoop.current.add(port, to: .default)
            made.withLock { $0 = port }
            ready.signal()
        }
        waitOrFail(ready, "the server's port")
        let port = try XCTUnwrap(made.withLock { $0 })
        XCTAssertThrowsError(try port.remote.sendRequest(LoopMessage(id: 1), receiveTimeout: .milliseconds(500))) { error in
            XCTAssertEqual(error as? PortError, .receiveTimedOut(port.remote.address))
        }
        XCTAssertEqual(port.statistics.repliesFailed, 1, "the reply too large to send was counted")
        port.invalidate()
        server.stop()
    }

    // MARK: - Helpers

    /// A child process sends one message a byte over the limit (refused, it says so and
    /// exits with status 1), then another child sends one exactly at the limit (it arrives whole).
    private func assertRefusedOverTheLimitAndDeliveredAtIt(tcp: Bool, file: StaticString = #filePath, line: UInt = #line) throws {
        let received = LockedValue<[Int]>([])
        let port = try LocalPort { message in
            received.withLock { $0.append(message.data.first?.count ?? -1) }
            return nil
        }
        defer { port.invalidate() }
        let target: String
        if tcp {
            target = try port.bind(tcp: "tcp://127.0.0.1:*").rawValue
        } else {
            target = "oversized-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            try port.register(name: target)
        }
        ThreadRunLoop.current.add(port, to: .default)

        let over = try startExitFlushProbe([target, "1", "exit", "--size", "\(Self.limit + 1)"])
        XCTAssertEqual(over.waitForExit(), .exited(1), "the send failed", file: file, line: line)
        XCTAssertTrue(over.stderr.contains("send failed: a data component of \(Self.limit + 1) bytes is over the wire limit of \(Self.limit) bytes per frame"),
                      over.stderr, file: file, line: line)

        let at = try startExitFlushProbe([target, "1", "exit", "--size", "\(Self.limit)"])
        let limit = Deadline.after(.seconds(60))
        while received.withLock({ $0.isEmpty }), Deadline.now() < limit {
            _ = ThreadRunLoop.current.run(mode: .default, before: .after(.milliseconds(100)))
        }
        XCTAssertEqual(at.waitForExit(), .exited(0), at.stderr, file: file, line: line)
        XCTAssertEqual(received.withLock { $0 }, [Self.limit], "only the message at the limit arrived, whole", file: file, line: line)
        XCTAssertEqual(port.statistics.messagesDropped, 0, file: file, line: line)
    }
}
