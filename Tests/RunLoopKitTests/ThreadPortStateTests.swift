@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// A thread's connections to the ports it sends to are bounded: a cap, and an idle limit.
final class ThreadPortStateTests: XCTestCase {
    /// Ports nobody serves; one-way sends to them queue (in-process, they are open).
    private func ports(_ count: Int) throws -> [LocalPort] {
        try (0..<count).map { _ in try LocalPort() }
    }

    func testAThreadKeepsNoMoreConnectionsThanItsCap() throws {
        let destinations = try ports(10)
        let counts = LockedValue<[Int]>([])
        TestThread {
            let state = ThreadPortState.current
            state.maxConnections = 4
            for port in destinations {
                try! port.remote.send(LoopMessage(id: 1))
                counts.withLock { $0.append(state.connectionCount) }
            }
        }.join()
        XCTAssertEqual(counts.withLock { $0 }, [1, 2, 3, 4, 4, 4, 4, 4, 4, 4])
        destinations.forEach { $0.invalidate() }
    }

    func testAConnectionUnusedForTheIdleLimitIsClosedWhenTheThreadNextOpensOne() throws {
        let destinations = try ports(3)
        let counts = LockedValue<[Int]>([])
        TestThread {
            let state = ThreadPortState.current
            state.idleLimit = .zero // every connection but the one in use is idle at once
            for port in destinations + [destinations[0]] {
                try! port.remote.send(LoopMessage(id: 1))
                counts.withLock { $0.append(state.connectionCount) }
            }
        }.join()
        XCTAssertEqual(counts.withLock { $0 }, [1, 1, 1, 1], "each new connection closed the idle one before it")
        destinations.forEach { $0.invalidate() }
    }

    func testAThreadWhoseConnectionWaitsInItsLoopLeavesItsLoopFreeableOnceItExits() throws {
        let destination = try LocalPort()
        let loopBox = LockedValue<ThreadRunLoop?>(nil)
        TestThread {
            // A request nobody answers: its connection is a source of the thread's loop
            // (which holds it) and holds that loop, until the thread exits.
            _ = try! ThreadPortState.current.sendRequest(LoopMessage(id: 1), to: destination.remote, replyTo: .waiting,
                                                         before: .after(.seconds(5)))
            loopBox.withLock { $0 = ThreadRunLoop.current }
        }.join()
        weak let loop = loopBox.withLock { $0 }
        XCTAssertNotNil(loop)
        loopBox.withLock { $0 = nil }
        XCTAssertNil(loop, "nothing keeps the exited thread's loop alive, its connection included")
        destination.invalidate()
    }

    func testAConnectionWaitingForAReplyIsNeverClosedToMakeRoom() throws {
        let destinations = try ports(4)
        let counts = LockedValue<[Int]>([])
        TestThread {
            let state = ThreadPortState.current
            state.maxConnections = 1
            // A request nobody answers: its connection waits for the reply until settled.
            let (_, waiting) = try! state.sendRequest(LoopMessage(id: 1), to: destinations[0].remote, replyTo: .waiting, before: .after(.seconds(5)))
            for port in destinations[1...2] {
                try! port.remote.send(LoopMessage(id: 2))
                counts.withLock { $0.append(state.connectionCount) }
            }
            waiting.replySettled()
            try! destinations[3].remote.send(LoopMessage(id: 3))
            counts.withLock { $0.append(state.connectionCount) }
        }.join()
        XCTAssertEqual(counts.withLock { $0 }, [2, 2, 1], "over the cap while a reply is awaited, back under it once settled")
        destinations.forEach { $0.invalidate() }
    }
}
