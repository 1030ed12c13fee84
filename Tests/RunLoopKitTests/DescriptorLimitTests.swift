import CAcceptGuard
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

    /// A process serving a named port, at the limit (soft and hard) while a client is served:
    /// the next ipc client that connects neither aborts it (libzmq's ipc listener asserts on
    /// `EMFILE`) nor makes it spin; the existing client keeps its replies, the new one waits
    /// and is served once descriptors are free again.
    func testAServerAtTheDescriptorLimitKeepsItsClientAndNeitherAbortsNorSpinsWhenANewIPCClientConnects() throws {
        try expectServedAtTheLimit(transport: "ipc", test: #function)
    }

    /// The same over tcp, whose listener in libzmq would spin a CPU on `EMFILE` instead.
    func testAServerAtTheDescriptorLimitKeepsItsClientAndDoesNotSpinWhenANewTCPClientConnects() throws {
        try expectServedAtTheLimit(transport: "tcp", test: #function)
    }

    /// `RemotePort(named:)` at the limit cannot open the name's lock file to test it: a
    /// typed `EMFILE`, not "no live port" for a name a live port holds.
    func testLookingUpALiveNameAtTheDescriptorLimitFailsWithEMFILENotNameNotFound() throws {
        let name = "descriptor-limit-lookup-\(getpid())"
        let port = try LocalPort(name: name) { _ in nil }
        defer { port.invalidate() }
        let report = try expectPassingChild(self, test: #function, variable: DescriptorLimitTests.scenarioVariable,
                                            scenario: "lookup \(name)")
        XCTAssertTrue(report.contains("EMFILE-ERROR"), "the child's report:\n\(report)")
    }

    /// Runs the scenario in a child process; it must end with the typed error and recover.
    private func expectChild(scenario: String, test: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let report = try expectPassingChild(self, test: test, variable: DescriptorLimitTests.scenarioVariable,
                                            scenario: scenario, file: file, line: line)
        XCTAssertTrue(report.contains("EMFILE-ERROR"), "the child's report:\n\(report)", file: file, line: line)
    }

    /// Starts a child serving a port over `transport`, and plays its clients (see `serve`).
    private func expectServedAtTheLimit(transport: String, test: String) throws {
        let child = try SpawnedProcess(childTestArguments(self, test: test),
                                       environment: [DescriptorLimitTests.scenarioVariable: "serve \(transport)"])
        func childState() -> String { "the child's report:\n\(child.stdout)\n\(child.stderr)" }
        guard child.waitForLine("READY"),
              let line = child.stdout.split(separator: "\n").first(where: { $0.hasPrefix("ADDRESS ") }) else {
            return XCTFail("the server did not start: \(childState())")
        }
        let server = RemotePort(try PortAddress(validating: String(line.dropFirst("ADDRESS ".count))))
        @Sendable func request(_ id: Int32, _ text: String, timeout: Duration = .seconds(10)) throws(PortError) -> String? {
            try server.sendRequest(LoopMessage(id: id, text: text), sendTimeout: timeout, receiveTimeout: timeout).text
        }
        do {
            XCTAssertEqual(try request(Command.echo, "before"), "before")
            let full = try request(Command.fill, "")
            XCTAssertEqual(full?.hasPrefix("full"), true, "\(full ?? "nil")")
            let cpuBefore = processCPUTicks(child.pid)
            let start = ContinuousClock.now
            // A new client: its connection cannot be accepted. It waits, its request unanswered.
            let newClient = LockedValue<Result<String?, PortError>?>(nil)
            TestThread {
                newClient.withLock { $0 = Result { () throws(PortError) in try request(Command.echo, "new", timeout: .seconds(2)) } }
            }.join()
            // The existing client is still answered after the new one's attempts.
            XCTAssertEqual(try request(Command.echo, "during"), "during")
            let elapsed = ContinuousClock.now - start
            let cpu = processCPUTicks(child.pid) - cpuBefore
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print("\(transport): the server used \(cpu) ticks of CPU (1/\(sysconf(Int32(_SC_CLK_TCK))) s) over \(elapsed) at the limit")
            switch newClient.withLock({ $0 }) {
            case .failure(.receiveTimedOut), .failure(.sendTimedOut): break
            case let other: XCTFail("the new client at the limit: \(String(describing: other))")
            }
            // A spinning listener takes a whole CPU: 100 ticks a second.
            XCTAssertLessThan(Double(cpu), 25 * seconds, "the server spun at the limit")
            XCTAssertEqual(try request(Command.free, ""), "freed")
            // With descriptors free again, a new client is served.
            let served = LockedValue<Result<String?, PortError>?>(nil)
            TestThread { served.withLock { $0 = Result { () throws(PortError) in try request(Command.echo, "after") } } }.join()
            XCTAssertEqual(try served.withLock { $0 }?.get(), "after")
            // The guard dropped the new client's connections, and always had its reserve.
            let counts = try request(Command.guardCounts, "") ?? ""
            XCTAssertTrue(!counts.hasPrefix("0 dropped") && counts.hasSuffix(" 0 missed"), counts)
            try server.send(LoopMessage(id: Command.stop))
        } catch {
            XCTFail("\(error); \(childState())")
        }
        let exit = child.waitForExit(seconds: 30)
        XCTAssertEqual(exit?.shellStatus, 0, "\(String(describing: exit)); \(childState())")
    }

    /// The child's CPU time so far (user + system), in clock ticks, from `/proc/<pid>/stat`.
    private func processCPUTicks(_ pid: pid_t) -> Int {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let nameEnd = stat.lastIndex(of: ")") else { return 0 }
        // After the name: state is field 3; utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: nameEnd)...].split(separator: " ")
        guard fields.count > 12 else { return 0 }
        return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }

    /// What the server of `serve` does with a request's id.
    private enum Command {
        static let echo: Int32 = 1 // replies with the request's text
        static let fill: Int32 = 2 // lowers the limit and takes every descriptor left
        static let free: Int32 = 3 // closes the descriptors it took
        static let guardCounts: Int32 = 4 // replies with the accept guard's counts
        static let stop: Int32 = 5 // stops
    }

    // MARK: - The scenarios (in the child)

    /// `scenario` is "<descriptors left> <call expected to fail>", or "existing <call>":
    /// a loop that already serves a port, then none left.
    private static func runScenario(_ scenario: String) -> Bool {
        let parts = scenario.split(separator: " ").map(String.init)
        guard parts.count == 2 else { return childReport(false, "bad scenario \(scenario)") }
        if parts[0] == "serve" { return serve(transport: parts[1]) }
        if parts[0] == "lookup" { return lookUpAtTheLimit(parts[1]) }
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

    /// Serves a port (named, over ipc; or bound to tcp on loopback) until told to stop,
    /// printing its address and READY. Its handler plays `Command`: `fill` sets the soft and
    /// hard limits a little above the highest open descriptor and opens eventfds until
    /// `EMFILE`, so that no descriptor is left while the client is being served.
    private static func serve(transport: String) -> Bool {
        let loop = ThreadRunLoop.current
        let fillers = SharedValue<[Int32]>([])
        let port: LocalPort
        let address: PortAddress
        do {
            port = try LocalPort(name: transport == "ipc" ? "descriptor-limit-\(getpid())" : nil) { request in
                switch request.id {
                case Command.fill:
                    guard lowerLimitToOpenDescriptors(spare: 16) else { return LoopMessage(id: 0, text: "cannot lower the limit") }
                    let taken = fillers.withLock { taken in
                        while let fd = try? Kernel.eventDescriptor() { taken.append(fd) }
                        return taken.count
                    }
                    return LoopMessage(id: 0, text: "full \(taken)")
                case Command.free:
                    fillers.withLock { taken in
                        for fd in taken { Kernel.close(fd) }
                        taken = []
                    }
                    return LoopMessage(id: 0, text: "freed")
                case Command.guardCounts:
                    return LoopMessage(id: 0, text: "\(rlk_accept_guard_dropped()) dropped, \(rlk_accept_guard_missed()) missed")
                case Command.stop:
                    loop.stop()
                    return nil
                default:
                    return LoopMessage(id: 0, text: request.text ?? "")
                }
            }
            if transport == "ipc" {
                // Its ipc socket, as another process reaches it (here the name means inproc).
                address = PortAddress(unchecked: "ipc://\(try RuntimeDirectory.path())/\(port.name ?? "").sock")
            } else {
                address = try port.bind(tcp: "tcp://127.0.0.1:*")
            }
        } catch {
            return childReport(false, "the port could not be made: \(error)")
        }
        loop.add(port, to: .default)
        print("ADDRESS \(address)")
        print("READY")
        fflush(nil)
        loop.run()
        port.invalidate()
        return childReport(true, "served to the end")
    }

    /// Looks up `name`, held by a live port of the parent, with no descriptor left: the
    /// typed EMFILE; then with room again, the port.
    private static func lookUpAtTheLimit(_ name: String) -> Bool {
        var original = rlimit()
        getrlimit(RLIMIT_NOFILE_VALUE, &original)
        guard lowerLimit(leaving: 0, from: original) else { return childReport(false, "cannot lower RLIMIT_NOFILE") }
        let outcome = Result { () throws(PortError) in try RemotePort(named: name) }
        setrlimit(RLIMIT_NOFILE_VALUE, &original)
        switch outcome {
        case .failure(.system(let error)) where error.code == .tooManyOpenFiles:
            print("EMFILE-ERROR \(error)")
        case let other:
            return childReport(false, "at the limit, RemotePort(named:) gave \(other)")
        }
        do {
            _ = try RemotePort(named: name)
        } catch {
            return childReport(false, "with room again, the name was not found: \(error)")
        }
        return childReport(true, "found with room again")
    }

    /// Sets the soft and hard limits `spare` above the highest open descriptor.
    private static func lowerLimitToOpenDescriptors(spare: Int) -> Bool {
        let highest = openDescriptors().max() ?? 2
        var lowered = rlimit(rlim_cur: rlim_t(Int(highest) + 1 + spare), rlim_max: rlim_t(Int(highest) + 1 + spare))
        print("soft and hard limit \(lowered.rlim_cur)")
        return setrlimit(RLIMIT_NOFILE_VALUE, &lowered) == 0
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
