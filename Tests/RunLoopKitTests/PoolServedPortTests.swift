import RunLoopKit
import RunLoopTestSupport
import XCTest

/// A port whose deferring handler hands its requests to a `WorkerPool` (README, "A server
/// that answers from a pool"): what its requester gets when the pool no longer takes work.
final class PoolServedPortTests: XCTestCase {
    func testARequestHandedToAStoppedPoolIsAnsweredWithThePoolsFailureNotATimeout() throws {
        let pool = try WorkerPool(name: "stopped", count: 1)
        pool.stop()
        let served = SharedValue<LocalPort?>(nil)
        let thread = LoopThread { loop in
            let port = try! LocalPort(handling: .deferring { _, right in
                guard let right else { return }
                try pool.perform(moving: right) { right in right.reply(LoopMessage(id: 0, text: "never")) }
            })
            loop.add(port, to: .default)
            served.withLock { $0 = port }
        }
        let port = served.withLock { $0! }
        XCTAssertThrowsError(try port.remote.sendRequest(LoopMessage(id: 2), receiveTimeout: .seconds(30))) { error in
            XCTAssertEqual(error as? PortError,
                           .remoteHandlerFailed(port.remote.address, reason: "\(RunLoopError.stopped)"))
        }
        XCTAssertEqual(port.statistics.handlerErrors, 1, "the handler threw perform's error")
        XCTAssertEqual(port.statistics.rightsOutstanding, 0, "nobody holds the right")
        thread.stop()
    }
}
