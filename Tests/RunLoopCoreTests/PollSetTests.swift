import CLinuxPoll
import Glibc
@testable import RunLoopCore
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// The poll set's wait: `epoll_pwait2` through `syscall(2)` with a nanosecond timeout, and
/// `epoll_wait` with a millisecond one, rounded up, on kernels without it.
/// (A `FakePort` gives the loop its poll set.)
final class PollSetTests: XCTestCase {
    private static let scenarioVariable = "RUNLOOPKIT_POLL_SET_SCENARIO"

    override func setUp() {
        super.setUp()
        guard childScenario(PollSetTests.scenarioVariable) != nil else { return }
        endChild { PollSetTests.runWithEpollPwait2Missing() }
    }

    /// A loop asleep in its poll set: `mode` holds only a port, which gets no message.
    private func loopWithPortOnly(in mode: LoopMode) throws -> (ThreadRunLoop, FakePort) {
        let loop = ThreadRunLoop.current
        let port = try FakePort()
        loop.addItem(.port(port), binding: nil, to: mode)
        return (loop, port)
    }

    /// Deadlines nearer than `FarDeadlineTimer.threshold` are given to the wait itself.
    private static let nearTimeout = Duration.microseconds(5_300)

    func testWithoutEpollPwait2ARunTimesOutAtItsDeadlineNeverBeforeThroughMillisecondWaitsRoundedUp() throws {
        let mode = LoopMode("pollset-\(#line)")
        let (loop, port) = try loopWithPortOnly(in: mode)
        defer { loop.removeEverywhere(.port(port)) }
        loop.poller.forcesMillisecondWaits = true
        defer { loop.poller.forcesMillisecondWaits = false }
        let waitsBefore = loop.poller.millisecondWaits
        let earlyBefore = loop.poller.millisecondWaitsEndedEarly
        for _ in 0..<20 {
            let start = Deadline.now()
            XCTAssertEqual(loop.run(mode: mode, timeout: PollSetTests.nearTimeout, returnAfterSourceHandled: true), .timedOut)
            XCTAssertGreaterThanOrEqual(Deadline.now() - start, PollSetTests.nearTimeout)
        }
        XCTAssertGreaterThanOrEqual(loop.poller.millisecondWaits - waitsBefore, 20, "the runs slept in epoll_wait")
        XCTAssertEqual(loop.poller.millisecondWaitsEndedEarly - earlyBefore, 0,
                       "no millisecond wait returned before its deadline: 5.3 ms is waited as 6, not 5")
    }

    func testWhereTheKernelHasEpollPwait2ARunSleepsInItThroughSyscall() throws {
        let mode = LoopMode("pollset-\(#line)")
        let (loop, port) = try loopWithPortOnly(in: mode)
        defer { loop.removeEverywhere(.port(port)) }
        var name = utsname()
        uname(&name)
        let release = withUnsafeBytes(of: name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let version = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        let hasEpollPwait2 = version.count == 2 && (version[0], version[1]) >= (5, 11)
        let waitsBefore = loop.poller.millisecondWaits
        let start = Deadline.now()
        XCTAssertEqual(loop.run(mode: mode, timeout: PollSetTests.nearTimeout, returnAfterSourceHandled: true), .timedOut)
        XCTAssertGreaterThanOrEqual(Deadline.now() - start, PollSetTests.nearTimeout)
        XCTAssertEqual(loop.poller.millisecondWaits == waitsBefore, hasEpollPwait2,
                       "kernel \(release): epoll_pwait2 is used exactly where the kernel has it")
    }

    /// A kernel without `epoll_pwait2`, made in a child process with a seccomp filter that
    /// fails the call with `ENOSYS`: the poll set falls back to `epoll_wait` by itself, and
    /// a second loop of the process never tries `epoll_pwait2` again.
    func testOnAKernelWithoutEpollPwait2TheLoopFallsBackToEpollWaitOncePerProcessAndKeepsItsDeadlines() throws {
        let report = try expectPassingChild(self, test: #function, variable: PollSetTests.scenarioVariable, scenario: "ENOSYS")
        XCTAssertTrue(report.contains("PASS fell back"), "the child's report:\n\(report)")
    }

    /// In the child: runs timed runs on two loops with `epoll_pwait2` denied. Needs seccomp,
    /// which every Linux since 3.5 has: where a sandbox forbids it, the test fails and says so.
    private static func runWithEpollPwait2Missing() -> Bool {
        // Denied for this thread and the ones it starts from now on (the second loop's).
        guard clinux_deny_system_call_for_tests(clinux_epoll_pwait2_number(), ENOSYS) == 0 else {
            return childReport(false, "seccomp is not available here: errno \(errno)")
        }
        guard !PollSet.isPreciseWaitMissing else { return childReport(false, "known missing before any wait") }
        guard timedRunsFallBack(loopName: "first") else { return false }
        guard PollSet.isPreciseWaitMissing else { return childReport(false, "ENOSYS was not remembered for the process") }
        let second = LockedValue(false)
        TestThread { second.withLock { $0 = timedRunsFallBack(loopName: "second") } }.join()
        guard second.withLock({ $0 }) else { return false }
        return childReport(true, "fell back to epoll_wait on both loops, never early")
    }

    /// Timed runs on the calling thread's loop: each ends at its deadline, not before, and
    /// sleeps in `epoll_wait`.
    private static func timedRunsFallBack(loopName: String) -> Bool {
        let mode = LoopMode("pollset-enosys")
        let loop = ThreadRunLoop.current
        guard let port = try? FakePort() else { return childReport(false, "no port") }
        defer { loop.removeEverywhere(.port(port)) }
        loop.addItem(.port(port), binding: nil, to: mode)
        for _ in 0..<10 {
            let start = Deadline.now()
            let result = loop.run(mode: mode, timeout: nearTimeout, returnAfterSourceHandled: true)
            guard result == .timedOut else { return childReport(false, "\(loopName) loop: \(result)") }
            guard Deadline.now() - start >= nearTimeout else { return childReport(false, "\(loopName) loop: ended early") }
        }
        let waits = loop.poller.millisecondWaits, early = loop.poller.millisecondWaitsEndedEarly
        print("\(loopName) loop: \(waits) millisecond waits, \(early) ended early")
        return childReport(waits >= 10 && early == 0, "\(loopName) loop waited in epoll_wait, rounded up")
    }
}
