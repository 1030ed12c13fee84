import Foundation
import Glibc
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// The `multiprocess-checkin` example run as a user runs it (README's examples): with
/// `--detached`, a main process that hears a worker process that is not its child die,
/// through the port the worker checked in with (`docs/reliability.md`, "A peer is gone").
final class MultiprocessCheckinExampleTests: XCTestCase {
    func testTheMainHearsAKilledWorkerThatIsNotItsChildThroughItsPortAndExitsZero() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rlk-detached-\(UUID().uuidString)").path
        XCTAssertEqual(mkdir(directory, 0o700), 0)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let run = try runBuiltExecutable("multiprocess-checkin", ["--workers", "3", "--detached", "--kill-one"],
                                         environment: ["RUNLOOPKIT_RUNTIME_DIR": directory])
        let output = run.stdout + run.stderr
        XCTAssertEqual(run.status, 0, output)

        // Each worker checked in; its pid (from its name's lock) has a parent that is not the main.
        var workers: [Int: pid_t] = [:]
        for line in run.stdout.split(separator: "\n") {
            guard let match = line.firstMatch(
                of: #/^main: worker-(\d+) checked in .*, pid (\d+) .*, parent pid (\d+) \(this process is pid (\d+)\)/#)
            else { continue }
            let (index, pid, parent, main) = (Int(match.1)!, pid_t(match.2)!, pid_t(match.3)!, pid_t(match.4)!)
            XCTAssertEqual(main, run.pid, "the main process is the one the test started")
            XCTAssertNotEqual(parent, run.pid, "worker-\(index) is a child of the main process")
            XCTAssertNotEqual(parent, 0, "worker-\(index)'s parent could not be read")
            workers[index] = pid
        }
        XCTAssertEqual(workers.keys.sorted(), [0, 1, 2], output)

        // The killed one's death was heard through its port, from the loop's callback, timed.
        let notice = run.stdout.firstMatch(
            of: #/main: worker-0 \(pid (\d+)\) is gone, as its port says: its owner process died, noticed (\d+) µs after the kill/#)
        XCTAssertNotNil(notice, output)
        if let notice {
            XCTAssertEqual(pid_t(notice.1), workers[0])
            print("the main noticed its detached worker's SIGKILL \(notice.2) µs after the kill")
        }
        XCTAssertTrue(run.stdout.contains("checked in 3/3 workers, 2/2 answered, "
            + "1 noticed dead by their port-loss source, 2/2 ended when told"), output)

        // No worker outlives the run, and no name is left behind.
        for (index, pid) in workers.sorted(by: { $0.key < $1.key }) {
            XCTAssertTrue(try processEnds(pid, within: 10_000), "worker-\(index) (pid \(pid)) is still running")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), [])
    }

    /// Whether process `pid` (not a child: nothing here can reap it) has ended, or ends
    /// within `milliseconds`: its pidfd becomes readable when it does.
    private func processEnds(_ pid: pid_t, within milliseconds: Int32) throws -> Bool {
        let pidfd: Int32
        do throws(SystemCallError) {
            pidfd = try Kernel.processDescriptor(pid)
        } catch {
            if error.code == .noSuchProcess { return true }
            throw error
        }
        defer { Kernel.close(pidfd) }
        var entry = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        var result: Int32
        repeat { result = poll(&entry, 1, milliseconds) } while result == -1 && errno == EINTR
        return result == 1
    }
}
