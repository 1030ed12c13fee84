import Foundation
import Glibc
import RunLoopTestSupport
import XCTest

/// The `pool-server` example run as a user runs it (README's examples): a named port whose
/// deferring handler hands each request to a worker pool, answered from the workers, and
/// a client process of the same program that times its requests.
final class PoolServerExampleTests: XCTestCase {
    func testAClientProcessGetsEveryAnswerFromThePoolsWorkersAndTheServerExitsZero() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rlk-pool-\(UUID().uuidString)").path
        XCTAssertEqual(mkdir(directory, 0o700), 0)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let run = try runBuiltExecutable("pool-server", ["--requests", "200", "--workers", "2"],
                                         environment: ["RUNLOOPKIT_RUNTIME_DIR": directory])
        let output = run.stdout + run.stderr
        XCTAssertEqual(run.status, 0, output)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 3, output)
        guard lines.count == 3 else { return }

        XCTAssertNotNil(lines[0].wholeMatch(of: #/server: serving 'runloopkit\.pool-server\.(\d+)' from a pool of 2 workers/#),
                        output)
        // The client checked every answer (a wrong one ends it with status 1) and timed them.
        let client = lines[1].wholeMatch(
            of: #/client: 200 requests answered, per request p50 (\d+\.\d) µs, p99 (\d+\.\d) µs/#)
        XCTAssertNotNil(client, output)
        if let client {
            let (p50, p99) = (Double(client.1)!, Double(client.2)!)
            XCTAssertGreaterThan(p50, 0)
            XCTAssertLessThanOrEqual(p50, p99)
        }
        // Every answer came from one of the pool's threads, and both took their share.
        let server = lines[2].wholeMatch(
            of: #/server: 200 requests answered from the pool \(answers-0 (\d+), answers-1 (\d+)\)/#)
        XCTAssertNotNil(server, output)
        if let server {
            let (first, second) = (Int(server.1)!, Int(server.2)!)
            XCTAssertEqual(first + second, 200, output)
            XCTAssertGreaterThan(first, 0, output)
            XCTAssertGreaterThan(second, 0, output)
        }
        // No name is left behind.
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), [])
    }
}
