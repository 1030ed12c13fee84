import Dispatch
import Foundation
import Glibc
@testable import RunLoopKit
import XCTest

/// A process that sends to another process's port and then ends normally loses nothing
/// its sends accepted (`ExitFlush`, `RemotePort.exitFlushLimit`).
///
/// The sender is `exit-flush-probe`, a child process; the receiver is a port of the test
/// process, which reads nothing until the child has sent everything (its queue holds only
/// 100 messages), so thousands of messages are still in the child's libzmq queue when it
/// ends: the child's end must wait for the test to read them.
final class ExitFlushTests: XCTestCase {
    private static let count = 10_000

    // MARK: - exit(0)

    func testMessagesSentJustBeforeExitAreAllDeliveredInOrderOverIPC() throws {
        try assertEverythingArrives(ending: "exit", over: .ipc)
    }

    func testMessagesSentJustBeforeExitAreAllDeliveredInOrderOverTCP() throws {
        try assertEverythingArrives(ending: "exit", over: .tcp)
    }

    // MARK: - Returning from main

    func testMessagesSentJustBeforeMainReturnsAreAllDeliveredInOrderOverIPC() throws {
        try assertEverythingArrives(ending: "return", over: .ipc)
    }

    func testMessagesSentJustBeforeMainReturnsAreAllDeliveredInOrderOverTCP() throws {
        try assertEverythingArrives(ending: "return", over: .tcp)
    }

    // MARK: - MainLoop stopped by a signal

    func testMessagesSentBeforeSIGTERMStopsTheMainLoopAreAllDeliveredInOrderOverIPC() throws {
        try assertEverythingArrives(ending: "signal", over: .ipc, signal: SIGTERM)
    }

    func testMessagesSentBeforeSIGINTStopsTheMainLoopAreAllDeliveredInOrderOverTCP() throws {
        try assertEverythingArrives(ending: "signal", over: .tcp, signal: SIGINT)
    }

    // MARK: - A sending thread's exit (the process then ends with _exit, running no exit handler)

    func testMessagesSentByAThreadThatExitsAreAllDeliveredInOrderOverIPC() throws {
        try assertEverythingArrives(ending: "thread-exit", over: .ipc)
    }

    func testMessagesSentByAThreadThatExitsAreAllDeliveredInOrderOverTCP() throws {
        try assertEverythingArrives(ending: "thread-exit", over: .tcp)
    }

    // MARK: - The limit

    /// A receiver that reads nothing: the exit waits for the limit (1 s), no longer, and
    /// the loss is logged.
    func testTheExitFlushLimitBoundsTheExitWhenTheReceiverReadsNothingAndTheLossIsLogged() throws {
        let receiver = try Receiver(over: .ipc, expected: Self.count)
        let limit = 1.0
        let child = try startExitFlushProbe([receiver.target, "\(Self.count)", "exit", "--limit-ms", "\(Int(limit * 1000))"])
        XCTAssertTrue(child.waitForLine("sent \(Self.count)"), "the child sent everything; stderr: \(child.stderr)")
        let sent = Deadline.now()
        let status = child.waitForExit()
        let took = (Deadline.now() - sent).components
        let exitTook = Double(took.seconds) + Double(took.attoseconds) * 1e-18
        XCTAssertEqual(status, .exited(0), child.stderr)
        XCTAssertGreaterThanOrEqual(exitTook, limit * 0.8, "the exit waited for the receiver, up to the limit")
        XCTAssertLessThan(exitTook, limit + 2, "the exit took the limit and no longer (2 s margin for the sanitizers)")
        XCTAssertTrue(child.stderr.contains("messages not flushed at process exit"), child.stderr)
        XCTAssertTrue(child.stderr.contains("connections=1"), child.stderr)
    }

    func testTheExitFlushLimitIsASettingThatKeepsItsValueWithinLibzmqsRange() {
        let saved = RemotePort.exitFlushLimit
        defer { RemotePort.exitFlushLimit = saved }
        XCTAssertEqual(saved, .seconds(5), "the documented default")
        RemotePort.exitFlushLimit = .milliseconds(250)
        XCTAssertEqual(RemotePort.exitFlushLimit, .milliseconds(250))
        RemotePort.exitFlushLimit = .seconds(-1)
        XCTAssertEqual(RemotePort.exitFlushLimit, .zero)
        RemotePort.exitFlushLimit = .seconds(Int64.max)
        XCTAssertEqual(RemotePort.exitFlushLimit, .milliseconds(Int64(Int32.max)))
    }

    // MARK: - Helpers

    enum Transport { case ipc, tcp }

    /// Runs the probe to `ending` with `count` messages queued, then reads them all.
    private func assertEverythingArrives(ending: String, over transport: Transport, signal: Int32? = nil,
                                         file: StaticString = #filePath, line: UInt = #line) throws {
        let receiver = try Receiver(over: transport, expected: Self.count)
        let child = try startExitFlushProbe([receiver.target, "\(Self.count)", ending])
        XCTAssertTrue(child.waitForLine("sent \(Self.count)"), "the child sent everything; stderr: \(child.stderr)",
                      file: file, line: line)
        if let signal {
            XCTAssertTrue(child.waitForLine("running"), "the child runs its main loop", file: file, line: line)
            kill(child.pid, signal)
        }
        // Only now does the test read: whatever the child's end did not flush is lost.
        receiver.receive(until: { child.hasExited })
        XCTAssertEqual(child.waitForExit(), .exited(0), child.stderr, file: file, line: line)
        receiver.drain()
        XCTAssertEqual(receiver.tally.received, Self.count,
                       "every message whose send returned arrived (\(ending), \(transport))", file: file, line: line)
        XCTAssertEqual(receiver.tally.outOfPlace, 0, "each arrived once, in the order sent", file: file, line: line)
        if signal != nil {
            XCTAssertTrue(child.stdout.contains("stopped by"), child.stdout, file: file, line: line)
        }
    }

    /// What the receiving port counted.
    struct Tally {
        var received = 0
        /// Messages whose sequence number was not the next expected one.
        var outOfPlace = 0
        var lastArrival = Deadline.now()
    }

    /// A port of the test thread that reads only when asked to, queueing at most 100 messages.
    private final class Receiver {
        let port: LocalPort
        let target: String
        let expected: Int
        private let box: Box

        private final class Box {
            var tally = Tally()
        }

        var tally: Tally { box.tally }

        init(over transport: Transport, expected: Int) throws {
            let box = Box()
            self.box = box
            self.expected = expected
            port = try LocalPort(receiveHighWaterMark: 100) { message in
                let sequence = message.data.first.map { bytes in
                    bytes.prefix(8).enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
                }
                if sequence != UInt64(box.tally.received) { box.tally.outOfPlace += 1 }
                box.tally.received += 1
                box.tally.lastArrival = .now()
                return nil
            }
            switch transport {
            case .ipc:
                let name = "exit-flush-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
                try port.register(name: name)
                target = name
            case .tcp:
                target = try port.bind(tcp: "tcp://127.0.0.1:*").rawValue
            }
            ThreadRunLoop.current.add(port, to: .default)
        }

        deinit { port.invalidate() }

        /// Runs the loop until every expected message came, or `senderGone` is true and
        /// nothing came for 2 s (what was lost never comes), or 60 s passed.
        func receive(until senderGone: () -> Bool) {
            let limit = Deadline.after(.seconds(60))
            box.tally.lastArrival = .now()
            while box.tally.received < expected, Deadline.now() < limit {
                if senderGone(), Deadline.now() - box.tally.lastArrival > .seconds(2) { break }
                _ = ThreadRunLoop.current.run(mode: .default, before: .after(.milliseconds(100)))
            }
        }

        /// Delivers whatever else is queued: a duplicate would show here.
        func drain() {
            while ThreadRunLoop.current.run(mode: .default, timeout: .milliseconds(50), returnAfterSourceHandled: true)
                    == .handledSource {}
        }
    }
}
