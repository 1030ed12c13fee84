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
/// 10 messages), so thousands of messages are still in the child's libzmq queue when it
/// ends: the child's end must wait for the test to read them.
///
/// Over ipc the test then reads all but the last `leftUnread` messages, and the rest only
/// once the child's end says it awaits that read (or the child ended): a child whose end
/// did not wait for the read would hang up with them still in the kernel, and a receiving
/// libzmq whose queue is full when its peer hangs up drops what the kernel still holds.
///
/// Times are bounded by what the code waits for, plus what the child's schedule accounts
/// for (`ProcessSchedule`: its threads running or ready to run, time stolen from the
/// machine), never by a margin for a busy machine.
final class ExitFlushTests: XCTestCase {
    private static let count = 10_000
    /// More than the receiving port takes from the kernel without being read: its queue
    /// (10 messages), the message libzmq's decoder holds when that queue is full, and the
    /// rest of libzmq's 8 KiB read (up to 7 messages of 1 KiB more): 11 to 18. So 12 to 19
    /// are left in the kernel, or in the sending libzmq's queue. Few enough (under 21 KiB,
    /// under 42 KiB of the kernel's accounting, which counts a buffer of each write) that
    /// the unix socket stays writable: it is writable only while it holds less than a
    /// quarter of its send buffer (53 KiB of the default 208 KiB, `net.core.wmem_default`),
    /// and libzmq could not be done while it is not.
    private static let leftUnread = 30
    /// What the exit flush logs (at `.trace`) when it awaits an ipc receiver's read.
    private static let readAwaited = "exit flush awaits the receivers' read"
    /// How late a wait of the flush wakes up, beyond what it asked for (the child's
    /// threads running or ready to run aside): the poll's timeout is rounded up to a
    /// whole millisecond (less than 1 ms) and the kernel's timer slack is 50 µs.
    private static let wakeUpLateness = Duration.microseconds(1_050)
    /// How often the exit flush looks at whether an ipc receiver read everything.
    private static let readCheckPeriod = Duration.milliseconds(2)

    // MARK: - exit(0)

    func testMessagesSentJustBeforeExitAreAllDeliveredInOrderOverIPC() throws {
        try assertEverythingArrives(ending: "exit", over: .ipc)
    }

    func testMessagesSentJustBeforeExitAreAllDeliveredInOrderOverTCP() throws {
        try assertEverythingArrives(ending: "exit", over: .tcp)
    }

    /// A receiver that falls behind by seconds (here, reads nothing for 3 s after the child
    /// sent everything) is not taken for gone: the connection keeps what it holds until it
    /// is read. (With a PING a second and a 1.5 s timeout, the child's connection closed
    /// with thousands of messages still in libzmq's queue.)
    func testMessagesSentJustBeforeExitReachATCPReceiverThatReadsNothingForThreeSeconds() throws {
        try assertEverythingArrives(ending: "exit", over: .tcp, stall: .seconds(3))
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
    /// the loss is logged. Measured by the child, from before its `exit` to after the
    /// flush: at least the limit (the flush's deadline is set after), and at most the limit
    /// plus a poll's lateness, once the time its threads ran or waited for a CPU and the
    /// time stolen from the machine are taken out.
    func testTheExitFlushLimitBoundsTheExitWhenTheReceiverReadsNothingAndTheLossIsLogged() throws {
        let receiver = try Receiver(over: .ipc, expected: Self.count)
        let limit = Duration.seconds(1)
        let child = try startExitFlushProbe([receiver.target, "\(Self.count)", "exit", "--limit-ms", "1000"])
        XCTAssertTrue(child.waitForLine("sent \(Self.count)"), "the child sent everything; stderr: \(child.stderr)")
        XCTAssertEqual(child.waitForExit(), .exited(0), child.stderr)
        let ending = try XCTUnwrap(ProcessSchedule(printedAs: "ending", in: child.stdout), child.stdout)
        let end = try XCTUnwrap(ProcessSchedule(printedAs: "end", in: child.stdout), child.stdout)
        XCTAssertGreaterThanOrEqual(Duration.nanoseconds(end.clock - ending.clock), limit,
                                    "the exit waited for the receiver until the limit")
        let slept = try XCTUnwrap(end.unaccountedWait(since: ending), "the child's threads all lived to its end")
        XCTAssertLessThanOrEqual(slept, limit + Self.wakeUpLateness,
                                 "the exit waited for the limit and no longer (it took \(end.clock - ending.clock) ns)")
        XCTAssertTrue(child.stderr.contains("messages not flushed at process exit"), child.stderr)
        XCTAssertTrue(child.stderr.contains("connections=1"), child.stderr)
    }

    /// Once libzmq wrote everything out to the kernel, an exit waits for an ipc receiver to
    /// read it sleeping: each of the receiver's reads wakes it (`PeerReadWatch`), no timer.
    /// 150 messages: 100 fill the receiving port's queue, the rest wait in the kernel.
    func testAnExitWaitingForAnIPCReceiverToReadSleepsUntilTheReceiverReads() throws {
        let count = 150
        let receiver = try Receiver(over: .ipc, expected: count)
        let child = try startExitFlushProbe([receiver.target, "\(count)", "exit"])
        XCTAssertTrue(child.waitForLine("sent \(count)"), "the child sent everything; stderr: \(child.stderr)")
        // The child's main thread is in its exit flush: count its wake-ups over half a second
        // (a window to measure in, not a synchronization), while nothing is read.
        let before = try XCTUnwrap(Self.voluntarySwitches(of: child.pid))
        _ = poll(nil, 0, 500)
        let after = try XCTUnwrap(Self.voluntarySwitches(of: child.pid))
        XCTAssertLessThan(after - before, 20, "the exit slept until the receiver read (a 2 ms poll wakes about 250 times)")
        receiver.receive(until: { child.hasExited })
        XCTAssertEqual(child.waitForExit(), .exited(0), child.stderr)
        XCTAssertEqual(receiver.tally.received, count, "everything arrived")
    }

    /// The voluntary context switches of `pid`'s main thread so far (each sleep it woke from).
    private static func voluntarySwitches(of pid: pid_t) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/status", encoding: .utf8) else { return nil }
        let line = status.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") }
        return line.flatMap { Int($0.split(separator: "\t").last.map(String.init) ?? "") }
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
    /// `stall`: how long the test then reads nothing, past any wait of its own.
    private func assertEverythingArrives(ending: String, over transport: Transport, signal: Int32? = nil,
                                         stall: Duration = .zero,
                                         file: StaticString = #filePath, line: UInt = #line) throws {
        let receiver = try Receiver(over: transport, expected: Self.count)
        // A limit past the test's own 60 s to read: however slowly the test reads (one
        // message a run, under a sanitizer, on a busy machine), only a flush that does not
        // wait for it loses messages.
        let child = try startExitFlushProbe([receiver.target, "\(Self.count)", ending, "--limit-ms", "120000"])
        receiver.whenAllArrived = { ProcessSchedule(ofProcess: child.pid) }
        XCTAssertTrue(child.waitForLine("sent \(Self.count)"), "the child sent everything; stderr: \(child.stderr)",
                      file: file, line: line)
        if let signal {
            XCTAssertTrue(child.waitForLine("running"), "the child runs its main loop", file: file, line: line)
            kill(child.pid, signal)
        }
        // The stimulus, not a synchronization: a receiver that falls behind.
        if stall > .zero { _ = poll(nil, 0, Int32(stall.components.seconds * 1_000)) }
        // Only now does the test read: whatever the child's end did not flush is lost.
        if transport == .ipc {
            // Over ipc, the last messages only once the child's end awaits their read, or
            // once the child ended (it hung up with some in the kernel: they are lost).
            receiver.receive(count: Self.count - Self.leftUnread)
            XCTAssertEqual(child.waitForFirstLine(containing: [Self.readAwaited, "ended"]), Self.readAwaited,
                           "the child's end awaits the receiver's read of what the kernel holds: \(child.stderr)",
                           file: file, line: line)
        }
        receiver.receive(until: { child.hasExited })
        XCTAssertEqual(child.waitForExit(), .exited(0), child.stderr, file: file, line: line)
        receiver.drain()
        XCTAssertEqual(receiver.tally.received, Self.count,
                       "every message whose send returned arrived (\(ending), \(transport))", file: file, line: line)
        XCTAssertEqual(receiver.tally.outOfPlace, 0, "each arrived once, in the order sent", file: file, line: line)
        if signal != nil {
            XCTAssertTrue(child.stdout.contains("stopped by"), child.stdout, file: file, line: line)
        }
        // Once everything was read, the end waits no longer than the flush's look at the
        // receiver's read and a wake-up (the child's threads running or ready to run, and
        // time stolen from the machine, aside). Only for an end on the main thread: the
        // figures of an exited thread end with it.
        if ending == "exit" || ending == "return" {
            let lastRead = try XCTUnwrap(receiver.allArrived, "the test read the last message", file: file, line: line)
            let end = try XCTUnwrap(ProcessSchedule(printedAs: "end", in: child.stdout), child.stdout, file: file, line: line)
            if end.clock > lastRead.clock {
                let slept = try XCTUnwrap(end.unaccountedWait(since: lastRead), "the child's threads all lived to its end",
                                          file: file, line: line)
                XCTAssertLessThanOrEqual(slept, Self.readCheckPeriod + Self.wakeUpLateness,
                                         "the end followed the last read at once (it took \(end.clock - lastRead.clock) ns)",
                                         file: file, line: line)
            }
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
            var whenAllArrived: (() -> ProcessSchedule)?
            var allArrived: ProcessSchedule?
        }

        var tally: Tally { box.tally }
        /// Called in the handler of the last expected message.
        var whenAllArrived: (() -> ProcessSchedule)? {
            get { box.whenAllArrived }
            set { box.whenAllArrived = newValue }
        }
        /// What `whenAllArrived` returned.
        var allArrived: ProcessSchedule? { box.allArrived }

        init(over transport: Transport, expected: Int) throws {
            let box = Box()
            self.box = box
            self.expected = expected
            port = try LocalPort(receiveHighWaterMark: 10) { message in
                let sequence = message.data.first.map { bytes in
                    bytes.prefix(8).enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
                }
                if sequence != UInt64(box.tally.received) { box.tally.outOfPlace += 1 }
                box.tally.received += 1
                box.tally.lastArrival = .now()
                if box.tally.received == expected { box.allArrived = box.whenAllArrived?() }
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

        /// Runs the loop, one message a run, until `count` messages came, or 60 s passed.
        func receive(count: Int) {
            let limit = Deadline.after(.seconds(60))
            while box.tally.received < count, Deadline.now() < limit {
                _ = ThreadRunLoop.current.run(mode: .default, timeout: .milliseconds(100), returnAfterSourceHandled: true)
            }
        }

        /// Delivers whatever else is queued: a duplicate would show here.
        func drain() {
            while ThreadRunLoop.current.run(mode: .default, timeout: .milliseconds(50), returnAfterSourceHandled: true)
                    == .handledSource {}
        }
    }
}
