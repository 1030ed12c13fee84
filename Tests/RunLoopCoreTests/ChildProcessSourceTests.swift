import Foundation
import Glibc
@testable import RunLoopCore
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// Child-process sources: a child's exit status, or the signal that ended it, on the loop's thread.
final class ChildProcessSourceTests: XCTestCase {
    private let mode = LoopMode("ChildProcessSourceTests")

    /// Runs the calling thread's loop in the test's mode until `exit` is set.
    private func runUntilHeard(_ exit: SharedValue<ChildExit?>) -> ChildExit? {
        XCTAssertTrue(runCurrentLoop(in: mode) { exit.withLock { $0 } != nil }, "the child's end was never heard")
        return exit.withLock { $0 }
    }

    /// Makes the calling thread's loop create its poll set and far-deadline timer (a ready
    /// pipe watched once with a far deadline, then closed).
    private func warmUpPollSet() {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(nonBlockingPipe(&fds), 0)
        var byte: UInt8 = 1
        XCTAssertEqual(write(fds[1], &byte, 1), 1)
        let source = DescriptorSource(descriptor: fds[0], watching: .readable, ownership: .owned) { _ in }
        ThreadRunLoop.current.add(source, to: mode)
        XCTAssertTrue(ThreadRunLoop.current.run(mode: mode, before: .after(.seconds(20))))
        source.invalidate()
        close(fds[1])
    }

    private func isReaped(_ pid: pid_t) -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == -1 && errno == ECHILD
    }

    private func watch(_ pid: pid_t, usePidfd: Bool, into exit: SharedValue<ChildExit?>) throws -> ChildProcessSource {
        let loop = ThreadRunLoop.current
        let source = try ChildProcessSource(pid: pid, usePidfd: usePidfd) { ended in
            XCTAssertTrue(loop.isOwnerThread, "on the loop's thread")
            exit.withLock { $0 = ended }
        }
        loop.add(source, to: mode)
        return source
    }

    func testAChildsExitStatusReachesTheHandlerOnTheLoopsThreadAndTheChildIsReaped() throws {
        let exit = SharedValue<ChildExit?>(nil)
        let pid = spawnChild(["/bin/sh", "-c", "exit 3"])
        let source = try watch(pid, usePidfd: true, into: exit)
        XCTAssertTrue(source.usesPidfd, "this kernel has pidfds")
        XCTAssertEqual(runUntilHeard(exit), .exited(3))
        XCTAssertFalse(source.isValid, "told once, then invalid")
        XCTAssertFalse(ThreadRunLoop.current.contains(source, in: mode))
        XCTAssertTrue(isReaped(pid), "no zombie left")
        XCTAssertEqual(fcntl(source.descriptorSource.descriptor, F_GETFD), -1, "the pidfd is closed")
    }

    func testAKilledChildsSignalReachesTheHandler() throws {
        let exit = SharedValue<ChildExit?>(nil)
        let pid = spawnChild(["/bin/sleep", "30"])
        _ = try watch(pid, usePidfd: true, into: exit)
        XCTAssertFalse(ThreadRunLoop.current.run(mode: mode, before: .after(.milliseconds(20))), "alive: nothing yet")
        XCTAssertEqual(kill(pid, SIGKILL), 0)
        XCTAssertEqual(runUntilHeard(exit), .signalled(SIGKILL, coreDumped: false))
        XCTAssertTrue(isReaped(pid))
    }

    func testWithoutPidfdsTheSIGCHLDFallbackReportsExitsAndSignalsTooAndRestoresSIGCHLD() throws {
        warmUpPollSet() // the loop's own descriptors exist before counting
        let before = ProcessResources.measure().descriptors
        let exited = SharedValue<ChildExit?>(nil)
        let killed = SharedValue<ChildExit?>(nil)
        let early = spawnChild(["/bin/sh", "-c", "exit 5"])
        var info = siginfo_t()
        XCTAssertEqual(waitid(P_PID, id_t(early), &info, WEXITED | WNOWAIT), 0, "ended before it is watched")
        let exitedSource = try watch(early, usePidfd: false, into: exited)
        XCTAssertFalse(exitedSource.usesPidfd)
        let sleeper = spawnChild(["/bin/sleep", "30"])
        _ = try watch(sleeper, usePidfd: false, into: killed)
        XCTAssertEqual(runUntilHeard(exited), .exited(5), "an end before watching is not missed")
        XCTAssertEqual(kill(sleeper, SIGKILL), 0)
        XCTAssertEqual(runUntilHeard(killed), .signalled(SIGKILL, coreDumped: false))
        XCTAssertTrue(isReaped(early))
        XCTAssertTrue(isReaped(sleeper))
        XCTAssertFalse(SignalRelay.isInstalled(.childStatusChanged), "SIGCHLD's action is back once nobody watches")
        XCTAssertEqual(ProcessResources.measure().descriptors, before, "the eventfds are closed")
    }

    func testWatchingAProcessThatDoesNotExistThrows() {
        XCTAssertThrowsError(try ChildProcessSource(pid: 0x3fff_fff0) { _ in }) { error in
            XCTAssertEqual((error as? SystemCallError)?.errno, ESRCH)
        }
    }
}
