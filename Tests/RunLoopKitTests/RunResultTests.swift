import CLinuxPoll
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// How a run ends when the kernel refuses its sleep: `RunResult.failed`, never a trap.
/// (Here, not in RunLoopCoreTests: a port is what the kernel is made to refuse.)
final class RunResultTests: XCTestCase {
    private static let scenarioVariable = "RUNLOOPKIT_RUN_RESULT_SCENARIO"

    override func setUp() {
        super.setUp()
        guard childScenario(RunResultTests.scenarioVariable) != nil else { return }
        endChild { RunResultTests.runWithAFailingWait() }
    }

    /// A port source whose descriptor is a regular file, which epoll refuses (`EPERM`).
    private final class UnwatchablePort: PortSourceDriver {
        let pollDescriptor: Int32
        private(set) var asked = 0

        init() throws {
            pollDescriptor = try Kernel.open("/proc/self/exe", O_RDONLY | O_CLOEXEC)
        }

        deinit { Kernel.close(pollDescriptor) }

        func hasPendingMessage() -> Bool {
            asked += 1
            return false
        }

        var canAskInsteadOfDraining: Bool { true }

        func handleOneMessage() -> PortDelivery {
            asked += 1
            return .empty
        }

        func detachedFromLoop() {}
    }

    func testARunWhosePortTheKernelRefusesEndsFailedWithTheErrorAndRunsAgainOnceThePortIsGone() throws {
        let loop = ThreadRunLoop.current
        let mode = LoopMode("refused-port-\(#line)")
        let refused = try UnwatchablePort()
        loop.addItem(.port(refused), binding: nil, to: mode)
        let expected = RunResult.failed(SystemCallError(call: "epoll_ctl(ADD)", errno: EPERM))
        XCTAssertEqual(loop.run(mode: mode, timeout: .seconds(5), returnAfterSourceHandled: false), expected)
        XCTAssertEqual(loop.run(mode: mode, timeout: .seconds(5), returnAfterSourceHandled: false), expected,
                       "a later run tries the registration again")
        XCTAssertFalse(loop.run(mode: mode, before: .after(.seconds(5))), "runMode:beforeDate: says no source was handled")
        XCTAssertEqual(refused.asked, 0, "a run that failed delivered nothing")

        loop.removeItem(.port(refused), from: mode)
        let port = try LocalPort { _ in nil }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        try port.send(LoopMessage(id: 3))
        XCTAssertEqual(loop.run(mode: mode, timeout: .seconds(20), returnAfterSourceHandled: true), .handledSource,
                       "the loop runs on")
    }

    func testAFailedResultSaysWhatTheKernelRefused() {
        let result = RunResult.failed(SystemCallError(call: "epoll_ctl(ADD)", errno: ENOSPC))
        XCTAssertEqual(result.description, "failed: epoll_ctl(ADD) failed: No space left on device (errno 28)")
    }

    /// A wait the kernel fails (here `epoll_pwait2` made to fail with `EBADF` by a seccomp
    /// filter, in a child process) ends the run with `.failed`, and ends a worker's
    /// resident run rather than spinning on it.
    func testARunWhoseWaitTheKernelFailsEndsFailedWithTheErrorNotATrap() throws {
        let report = try expectPassingChild(self, test: #function, variable: RunResultTests.scenarioVariable, scenario: "EBADF")
        XCTAssertTrue(report.contains("PASS failed"), "the child's report:\n\(report)")
    }

    /// In the child: a loop asleep in its poll set whose wait fails.
    private static func runWithAFailingWait() -> Bool {
        let loop = ThreadRunLoop.current
        let mode = LoopMode("failing-wait")
        guard let port = try? LocalPort(handler: { _ in nil }) else { return childReport(false, "no port") }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        guard clinux_deny_system_call_for_tests(clinux_epoll_pwait2_number(), EBADF) == 0 else {
            return childReport(false, "seccomp is not available here: errno \(errno)")
        }
        let result = loop.run(mode: mode, timeout: .seconds(5), returnAfterSourceHandled: false)
        guard result == .failed(SystemCallError(call: "epoll_pwait2", errno: EBADF)) else {
            return childReport(false, "the run ended \(result)")
        }
        // A worker started now inherits the filter: its resident run ends at the failure,
        // its thread exits, and work handed to it fails instead of waiting forever.
        let worker: WorkerThread
        do {
            worker = try WorkerThread(name: "failing-wait")
            try worker.performAndWait {
                let port = try LocalPort { _ in nil }
                ThreadRunLoop.current.add(port, to: .default) // its first sleep in the poll set fails
            }
        } catch {
            return childReport(false, "the worker could not be set up: \(error)")
        }
        do {
            try worker.performAndWait {}
            return childReport(false, "work ran on a worker whose loop failed")
        } catch {
            print("the worker's later work: \(error)")
        }
        worker.stop()
        return childReport(true, "failed with \(result); the worker ended")
    }
}
