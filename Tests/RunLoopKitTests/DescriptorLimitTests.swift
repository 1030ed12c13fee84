import Dispatch
import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// A process at its descriptor limit (`RLIMIT_NOFILE`) that creates a loop and a port gets
/// a typed error and keeps running: no trap, no abort inside libzmq.
///
/// Each test runs its scenario in a child process (`expectPassingChild`), which lowers
/// its own limit so that only a given number of descriptors can still be opened, creates
/// the port, checks the error, raises the limit again and shows that a port then works.
/// A trap or an abort would end it with a signal.
final class DescriptorLimitTests: XCTestCase {
    private static let scenarioVariable = "RUNLOOPKIT_DESCRIPTOR_LIMIT_SCENARIO"

    override func setUp() {
        super.setUp()
        guard let scenario = childScenario(DescriptorLimitTests.scenarioVariable) else { return }
        endChild { DescriptorLimitTests.runScenario(scenario) }
    }

    // MARK: - The tests (in the parent)

    func testAPortCreatedWithNoDescriptorLeftForItsLoopsPollSetFailsWithEMFILEAndTheProcessGoesOn() throws {
        try expectChild(scenario: "0 epoll_create1", test: #function)
    }

    func testAPortCreatedWithRoomForTheEpollInstanceButNotItsEventfdFailsWithEMFILE() throws {
        try expectChild(scenario: "1 eventfd", test: #function)
    }

    func testTheFirstPortOfAProcessWithNoRoomForItsZeroMQContextFailsWithEMFILENotAnAbort() throws {
        try expectChild(scenario: "2 zmq_ctx_new", test: #function)
    }

    /// With room for the poll set, the context's mailbox and its reaper's eventfd, libzmq
    /// would abort on its reaper's `epoll_create` (`errno_assert`): the context is refused first.
    func testAFirstPortWithRoomForOnlyPartOfZeroMQsStartFailsWithEMFILENotAnAbort() throws {
        try expectChild(scenario: "4 zmq_ctx_new", test: #function)
    }

    func testAPortAddedToALoopThatHasOneAlreadyFailsWithEMFILEAtTheLimitAndTheFirstPortStillWorks() throws {
        try expectChild(scenario: "existing zmq_socket", test: #function)
    }

    /// Runs the scenario in a child process; it must end with the typed error and recover.
    private func expectChild(scenario: String, test: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let report = try expectPassingChild(self, test: test, variable: DescriptorLimitTests.scenarioVariable,
                                            scenario: scenario, file: file, line: line)
        XCTAssertTrue(report.contains("EMFILE-ERROR"), "the child's report:\n\(report)", file: file, line: line)
    }

    // MARK: - The scenarios (in the child)

    /// `scenario` is "<descriptors left> <call expected to fail>", or "existing <call>":
    /// a loop that already serves a port, then none left.
    private static func runScenario(_ scenario: String) -> Bool {
        let parts = scenario.split(separator: " ").map(String.init)
        guard parts.count == 2 else { return childReport(false, "bad scenario \(scenario)") }
        let loop = ThreadRunLoop.current
        // The loop exists and has run (a timer) before the limit is lowered.
        let timer = LoopTimer(fireAt: .now()) { _ in }
        loop.add(timer, to: .default)
        _ = loop.run(mode: .default, timeout: .seconds(5), returnAfterSourceHandled: false)
        var first: LocalPort?
        if parts[0] == "existing" {
            guard let port = workingPort(on: loop) else { return false }
            first = port
        }
        var original = rlimit()
        getrlimit(RLIMIT_NOFILE_VALUE, &original)
        let left = Int(parts[0]) ?? 0
        guard lowerLimit(leaving: left, from: original) else { return childReport(false, "cannot lower RLIMIT_NOFILE") }
        let outcome = Result { () throws(PortError) in try LocalPort { _ in nil } }
        setrlimit(RLIMIT_NOFILE_VALUE, &original)
        switch outcome {
        case .success:
            return childReport(false, "a port was created with \(left) descriptors left")
        case .failure(.system(let error)) where error.code == .tooManyOpenFiles && error.call.hasPrefix(parts[1]):
            print("EMFILE-ERROR \(error)")
        case .failure(let error):
            return childReport(false, "unexpected error: \(error)")
        }
        // The process goes on: with room again, a port is created and serves a message.
        guard workingPort(on: loop) != nil else { return false }
        if let first {
            guard deliver(to: first, on: loop) else { return childReport(false, "the first port stopped working") }
        }
        return childReport(true, "recovered")
    }

    /// A port on `loop` that has received a message through it, or nil (reported).
    private static func workingPort(on loop: ThreadRunLoop) -> LocalPort? {
        do {
            let port = try LocalPort { _ in nil }
            loop.add(port, to: .default)
            guard deliver(to: port, on: loop) else {
                _ = childReport(false, "a port created with room did not deliver")
                return nil
            }
            return port
        } catch {
            _ = childReport(false, "a port could not be created with room: \(error)")
            return nil
        }
    }

    private static func deliver(to port: LocalPort, on loop: ThreadRunLoop) -> Bool {
        do {
            try port.send(LoopMessage(id: 1), timeout: .seconds(10))
        } catch {
            return childReport(false, "send failed: \(error)")
        }
        return loop.run(mode: .default, timeout: .seconds(10), returnAfterSourceHandled: true) == .handledSource
    }

    /// Sets the soft limit so that exactly `left` descriptor numbers below it are free.
    private static func lowerLimit(leaving left: Int, from original: rlimit) -> Bool {
        let open = Set(openDescriptors())
        var limit = 0
        var free = 0
        while free < left || open.contains(Int32(limit)) {
            if !open.contains(Int32(limit)) { free += 1 }
            limit += 1
        }
        // `limit` is now the first number past the last free one wanted (or past the open ones).
        while open.contains(Int32(limit)) { limit += 1 }
        var lowered = original
        lowered.rlim_cur = rlim_t(limit)
        print("open descriptors \(open.count), soft limit \(limit), \(left) left")
        return setrlimit(RLIMIT_NOFILE_VALUE, &lowered) == 0
    }

    private static func openDescriptors() -> [Int32] {
        let names = (try? Kernel.directoryEntries("/proc/self/fd")) ?? []
        // The listing's own descriptor is closed again by now.
        return names.compactMap { Int32($0) }.filter { fcntl($0, F_GETFD) != -1 }
    }
}

/// `RLIMIT_NOFILE` as `getrlimit`/`setrlimit` take it (an enum in glibc's headers).
private let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
