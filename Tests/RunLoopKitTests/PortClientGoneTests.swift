import Glibc
@testable import RunLoopCore
@testable import RunLoopKit
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// A server learns when a requester's connection goes: the rights of its requests report
/// cancelled and the port keeps nothing of it. The requesters are
/// `Tests/peers/dying_clients.py`, pyzmq processes that send requests and are SIGKILLed.
final class PortClientGoneTests: XCTestCase {
    private static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("peers/dying_clients.py").path

    func testAfterAThousandClientsAreKilledMidRequestTheirRightsReportCancelledAndNoEntryRemains() throws {
        let kept = SharedValue<[ReplyRightBox]>([])
        let served = SharedValue<LocalPort?>(nil)
        let name = "dying-clients-\(getpid())"
        let thread = LoopThread { loop in
            let port = try! LocalPort(name: name, handling: .deferring { _, right in
                guard let right else { return }
                let box = ReplyRightBox(right)
                kept.withLock { $0.append(box) }
            })
            loop.add(port, to: .default)
            served.withLock { $0 = port }
        }
        let port = served.withLock { $0! }
        let endpoint = port.remote.address.rawValue
        XCTAssertTrue(endpoint.hasPrefix("ipc://"), endpoint)
        let clients = try (0..<10).map { _ in
            try SpawnedProcess(["/usr/bin/python3", Self.script, "--endpoint", endpoint, "--connections", "100"])
        }
        for client in clients { XCTAssertTrue(client.waitForLine("sent 100"), client.stderr) }
        XCTAssertTrue(waitUntil(within: .seconds(60)) { kept.withLock { $0.count } == 1000 }, "\(kept.withLock { $0.count }) requests came")
        XCTAssertEqual(port.statistics.rightsOutstanding, 1000)
        XCTAssertEqual(try thread.loop.performAndWait { port.outstandingRequests.connectionCount }, 1000)

        for client in clients { kill(client.pid, SIGKILL) }
        for client in clients { _ = client.waitForExit() }
        XCTAssertTrue(waitUntil(within: .seconds(60)) { port.statistics.requestsCancelled == 1000 },
                      "\(port.statistics.requestsCancelled) of 1000 requests were cancelled")
        XCTAssertEqual(kept.withLock { $0.filter(\.isCancelled).count }, 1000)
        let (entries, connections, descriptors) = try thread.loop.performAndWait {
            (port.outstandingRequests.count, port.outstandingRequests.connectionCount, port.outstandingRequests.descriptorCount)
        }
        XCTAssertEqual(entries, 0, "no stale request entry")
        XCTAssertEqual(connections, 0, "no stale connection entry")
        XCTAssertEqual(descriptors, 0, "no stale descriptor entry")

        let failedBefore = port.statistics.repliesFailed
        kept.withLock { $0.removeAll() } // the rights go: cancelled, so nothing is sent
        XCTAssertTrue(waitUntil(within: .seconds(60)) { port.statistics.rightsOutstanding == 0 })
        XCTAssertEqual(port.statistics.repliesFailed, failedBefore)
        thread.stop()
    }

    func testAClientThatClosesItsConnectionWithARequestOutstandingCancelsItsRightOnly() throws {
        let kept = SharedValue<[ReplyRightBox]>([])
        let served = SharedValue<LocalPort?>(nil)
        let thread = LoopThread { loop in
            let port = try! LocalPort(name: "closing-client-\(getpid())", handling: .deferring { _, right in
                guard let right else { return }
                let box = ReplyRightBox(right)
                kept.withLock { $0.append(box) }
            })
            loop.add(port, to: .default)
            served.withLock { $0 = port }
        }
        let port = served.withLock { $0! }
        let endpoint = port.remote.address.rawValue
        let staying = try SpawnedProcess(["/usr/bin/python3", Self.script, "--endpoint", endpoint, "--connections", "1"])
        XCTAssertTrue(staying.waitForLine("sent 1"), staying.stderr)
        XCTAssertTrue(waitUntil(within: .seconds(60)) { kept.withLock { $0.count } == 1 })
        let going = try SpawnedProcess(["/usr/bin/python3", Self.script, "--endpoint", endpoint, "--connections", "1"])
        XCTAssertTrue(going.waitForLine("sent 1"), going.stderr)
        XCTAssertTrue(waitUntil(within: .seconds(60)) { kept.withLock { $0.count } == 2 })
        XCTAssertEqual(try thread.loop.performAndWait { port.outstandingRequests.descriptorCount }, 2,
                       "each request is kept by the descriptor it came in on")
        XCTAssertEqual(try thread.loop.performAndWait { port.clientWatch != nil }, true)
        kill(going.pid, SIGKILL)
        _ = going.waitForExit()
        XCTAssertTrue(waitUntil(within: .seconds(60)) { port.statistics.requestsCancelled == 1 })
        XCTAssertEqual(kept.withLock { $0.map(\.isCancelled) }, [false, true], "only the gone client's request")
        kill(staying.pid, SIGKILL)
        _ = staying.waitForExit()
        kept.withLock { $0.removeAll() }
        thread.stop()
    }
}
