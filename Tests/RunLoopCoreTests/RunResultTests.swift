import CLinuxPoll
import Glibc
@testable import RunLoopCore
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// How a run ends when the kernel refuses its sleep: `RunResult.failed`, never a trap.
/// (A worker's resident run that fails so: `WorkerThreadTests`.)
final class RunResultTests: XCTestCase {
    private static let scenarioVariable = "RUNLOOPKIT_RUN_RESULT_SCENARIO"

    override func setUp() {
        super.setUp()
        guard childScenario(RunResultTests.scenarioVariable) != nil else { return }
        endChild { RunResultTests.runWithAFailingWait() }
    }

    /// A port source whose descriptor is a regular file, which epoll refuses (`EPERM`).
    private final class UnwatchablePort: PortBasedSource {
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
        let port = try FakePort()
        defer { loop.removeEverywhere(.port(port)) }
        loop.addItem(.port(port), binding: nil, to: mode)
        port.send()
        XCTAssertEqual(loop.run(mode: mode, timeout: .seconds(20), returnAfterSourceHandled: true), .handledSource,
                       "the loop runs on")
        XCTAssertEqual(port.delivered, 1)
    }

    func testAFailedResultSaysWhatTheKernelRefused() {
        let result = RunResult.failed(SystemCallError(call: "epoll_ctl(ADD)", errno: ENOSPC))
        XCTAssertEqual(result.description, "failed: epoll_ctl(ADD) failed: No space left on device (errno 28)")
    }

    /// A wait the kernel fails (here `epoll_pwait2` made to fail with `EBADF` by a seccomp
    /// filter, in a child process) ends the run with `.failed`.
    func testARunWhoseWaitTheKernelFailsEndsFailedWithTheErrorNotATrap() throws {
        let report = try expectPassingChild(self, test: #function, variable: RunResultTests.scenarioVariable, scenario: "EBADF")
        XCTAssertTrue(report.contains("PASS failed"), "the child's report:\n\(report)")
    }

    /// In the child: a loop asleep in its poll set whose wait fails.
    private static func runWithAFailingWait() -> Bool {
        let loop = ThreadRunLoop.current
        let mode = LoopMode("failing-wait")
        guard let port = try? FakePort() else { return childReport(false, "no port") }
        defer { loop.removeEverywhere(.port(port)) }
        loop.addItem(.port(port), binding: nil, to: mode)
        guard clinux_deny_system_call_for_tests(clinux_epoll_pwait2_number(), EBADF) == 0 else {
            return childReport(false, "seccomp is not available here: errno \(errno)")
        }
        let result = loop.run(mode: mode, timeout: .seconds(5), returnAfterSourceHandled: false)
        return childReport(result == .failed(SystemCallError(call: "epoll_pwait2", errno: EBADF)), "failed with \(result)")
    }
}
