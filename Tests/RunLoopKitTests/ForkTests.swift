import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// A process that forks after using ports: the child inherits the parent's `atexit`
/// handlers, its thread's connections, its name locks and its signal relay, and must touch
/// none of what is its parent's (docs/reliability.md, "A forked child").
///
/// Each scenario runs in a child test process (`expectPassingChild`), which serves a named
/// port, has a tcp connection to a port of this test process on the thread that forks,
/// and forks; it waits for its own child on a pidfd (`ChildProcessSource`) with a deadline,
/// then checks that it kept its name and its peer.
final class ForkTests: XCTestCase {
    private static let scenarioVariable = "RUNLOOPKIT_FORK_SCENARIO"

    override func setUp() {
        super.setUp()
        guard let scenario = childScenario(ForkTests.scenarioVariable) else { return }
        endChild { ForkTests.runScenario(scenario) }
    }

    // MARK: - The tests (in the parent)

    func testAForkedChildThatCallsExitEndsAtOnceAndTheParentKeepsItsNameAndItsPeer() throws {
        try expectChild(scenario: "exit", test: #function)
    }

    func testAForkedChildThatSendsOnItsParentsConnectionGetsATypedErrorNotALoop() throws {
        try expectChild(scenario: "send", test: #function)
    }

    func testASignalDeliveredToAForkedChildReachesNoneOfItsParentsSignalSources() throws {
        try expectChild(scenario: "signal", test: #function)
    }

    /// Serves a tcp port on a thread of this process (the child's peer), and runs `scenario`
    /// in a child process, which must pass.
    private func expectChild(scenario: String, test: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let address = LockedValue<PortAddress?>(nil)
        let peer = LoopThread { loop in
            let port = try! LocalPort { request in LoopMessage(id: request.id, text: "peer") }
            address.withLock { $0 = try! port.bind(tcp: "tcp://127.0.0.1:*") }
            loop.add(port, to: .default)
        }
        defer { peer.stop() }
        let target = try XCTUnwrap(address.withLock { $0 })
        let report = try expectPassingChild(self, test: test, variable: ForkTests.scenarioVariable,
                                            scenario: "\(scenario) \(target.rawValue)", file: file, line: line)
        XCTAssertFalse(report.contains("FAIL"), report, file: file, line: line)
    }

    // MARK: - The scenarios (in the child test process)

    /// How long a forked child may take to end. It does nothing but `exit`, or one send:
    /// the margin is for a loaded machine and the sanitizers (LeakSanitizer runs at `exit`).
    private static let childLimit = Duration.seconds(20)

    /// `scenario` is "<exit|send|signal> <the peer's tcp address>".
    private static func runScenario(_ scenario: String) -> Bool {
        let parts = scenario.split(separator: " ").map(String.init)
        guard parts.count == 2, let address = try? PortAddress(validating: parts[1]) else {
            return childReport(false, "bad scenario \(scenario)")
        }
        do {
            switch parts[0] {
            case "exit": return try exitScenario(peer: RemotePort(address))
            case "send": return try sendScenario(peer: RemotePort(address))
            case "signal": return try signalScenario()
            default: return childReport(false, "unknown scenario \(parts[0])")
            }
        } catch {
            return childReport(false, "\(error)")
        }
    }

    /// A request to the peer on this thread's connection (a cross-process one, over tcp).
    private static func peerAnswers(_ peer: RemotePort, _ when: String) -> Bool {
        do {
            let reply = try peer.sendRequest(LoopMessage(id: 41), sendTimeout: .seconds(10), receiveTimeout: .seconds(10))
            return childReport(reply.text == "peer", "the peer answers \(when) (\(reply.text ?? "no text"))")
        } catch {
            return childReport(false, "the peer answers \(when): \(error)")
        }
    }

    /// The thread has a connection to the peer, then a named port served on a thread of
    /// its own; it forks, and the forked child calls `exit(0)`.
    private static func exitScenario(peer: RemotePort) throws -> Bool {
        guard peerAnswers(peer, "before the fork") else { return false }
        let name = "fork-\(getpid())"
        let server = LoopThread { loop in
            let port = try! LocalPort(name: name) { request in LoopMessage(id: request.id, text: "named") }
            loop.add(port, to: .default)
        }
        defer { server.stop() }
        let directory = try RuntimeDirectory.path()
        let child = fork()
        if child == 0 { // runs the exit handlers it inherited
            skipLeakCheckAtExit() // the parent's other threads' objects would look leaked
            exit(0)
        }
        guard child > 0 else { return childReport(false, "fork failed: errno \(errno)") }
        var passed = childEnds(child, as: .exited(0))
        for file in ["\(directory)/\(name).sock", "\(directory)/\(name).lock"] {
            passed = childReport(FileManager.default.fileExists(atPath: file), "\(file) is still there") && passed
        }
        let request = try runBuiltExecutable("runloopkit", ["request", name, "--id", "6", "--timeout", "10"])
        passed = childReport(request.status == 0, "another process's request to \(name) gets its reply "
                             + "(status \(request.status): \(request.stdout) \(request.stderr))") && passed
        // Its own open file description of the lock file, as another process takes it.
        var refusal: PortError?
        do {
            let second = try LocalPort(name: name) { _ in nil }
            second.invalidate()
        } catch {
            refusal = error
        }
        if case .nameInUse(_, let holder)? = refusal {
            passed = childReport(holder == getpid(), "a second owner of \(name) is refused (holder \(holder.map { "\($0)" } ?? "?"))") && passed
        } else {
            passed = childReport(false, "a second owner of \(name) is refused: \(refusal.map { "\($0)" } ?? "it took the name")")
        }
        return peerAnswers(peer, "after the fork") && passed
    }

    /// The forked child sends on the connection it inherited: a typed error at once.
    private static func sendScenario(peer: RemotePort) throws -> Bool {
        guard peerAnswers(peer, "before the fork") else { return false }
        let child = fork()
        if child == 0 {
            do {
                try peer.send(LoopMessage(id: 1), timeout: .seconds(1))
                _exit(2) // sent: nothing failed
            } catch PortError.system(let error) where error.code == .forkedChild {
                _exit(0)
            } catch {
                _exit(3) // another error
            }
        }
        guard child > 0 else { return childReport(false, "fork failed: errno \(errno)") }
        let passed = childEnds(child, as: .exited(0))
        return peerAnswers(peer, "after the fork") && passed
    }

    /// The program's own SIGUSR2 handler ends the process with status 42; then the thread
    /// watches SIGUSR2, and the forked child raises it: the parent's source does not fire,
    /// and the child's own handler runs, as without RunLoopKit, ending it with 42.
    private static func signalScenario() throws -> Bool {
        signal(SIGUSR2) { _ in _exit(42) } // the action the relay replaces, and restores in the child
        let loop = ThreadRunLoop.current
        var seen = 0
        let source = try SignalSource(.user2) { count in seen += count }
        loop.add(source, to: .default)
        defer { source.invalidate() }
        let child = fork()
        if child == 0 {
            // Pending while blocked, then delivered inside sigsuspend; _exit(0) only if a
            // handler returned (the relay's, writing to its parent's eventfd).
            var blocked = sigset_t(), previous = sigset_t()
            sigemptyset(&blocked)
            sigaddset(&blocked, SIGUSR2)
            sigprocmask(SIG_BLOCK, &blocked, &previous)
            kill(getpid(), SIGUSR2)
            sigsuspend(&previous)
            _exit(0)
        }
        guard child > 0 else { return childReport(false, "fork failed: errno \(errno)") }
        // Under ThreadSanitizer the child runs no handler at all: it only has to end.
        var passed = childEnds(child, as: runningUnderThreadSanitizer ? .exited(0) : .exited(42))
        // The child wrote (or not) before it ended: one pass that does not wait sees it.
        _ = loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: false)
        passed = childReport(seen == 0, "the parent's source did not hear the child's signal (\(seen))") && passed
        // Its own signal, heard before the source goes (which restores SIGUSR2's default action).
        let before = seen
        kill(getpid(), SIGUSR2)
        let deadline = Deadline.after(.seconds(10))
        while seen == before, Deadline.now() < deadline {
            _ = loop.run(mode: .default, until: deadline, returnAfterSourceHandled: true)
        }
        return childReport(seen == before + 1, "the parent's own signal still reaches its source (\(seen - before))") && passed
    }

    /// Waits on a pidfd, `childLimit` at most, for `child` to end; one that did not is
    /// killed. Reports whether it ended as `expected`.
    private static func childEnds(_ child: pid_t, as expected: ChildExit) -> Bool {
        let loop = ThreadRunLoop.current
        var ended: ChildExit?
        guard let source = try? ChildProcessSource(pid: child, handler: { ended = $0 }) else {
            kill(child, SIGKILL)
            return childReport(false, "cannot watch the forked child")
        }
        loop.add(source, to: .default)
        let start = Deadline.now()
        let deadline = Deadline.after(childLimit)
        while ended == nil, Deadline.now() < deadline {
            _ = loop.run(mode: .default, until: deadline, returnAfterSourceHandled: true)
        }
        let took = Deadline.now() - start
        guard let result = ended else {
            kill(child, SIGKILL)
            let reaping = Deadline.after(.seconds(10))
            while ended == nil, Deadline.now() < reaping {
                _ = loop.run(mode: .default, until: reaping, returnAfterSourceHandled: true)
            }
            return childReport(false, "the forked child did not end within \(childLimit): killed")
        }
        return childReport(result == expected, "the forked child ended (\(result), expected \(expected)) in \(took)")
    }
}
