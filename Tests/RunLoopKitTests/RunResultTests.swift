import Glibc
@testable import RunLoopCore
@testable import RunLoopKit
@testable import RunLoopSystem
import XCTest

/// How a run ends when the kernel refuses its sleep: `RunResult.failed`, never a trap.
final class RunResultTests: XCTestCase {
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
}
