import Foundation // the README's names must not collide with Foundation's
import RunLoopKit
import XCTest

actor Station {
    let worker: WorkerThread
    nonisolated var unownedExecutor: UnownedSerialExecutor { worker.executor.asUnownedSerialExecutor() }
    init(worker: WorkerThread) { self.worker = worker }
    func isOnItsWorker() -> Bool { worker.loop.isOwnerThread }
}

/// The README's "Swift concurrency" section, kept compiling and true.
final class ReadmeConcurrencyTests: XCTestCase {
    func testTheReadmeConcurrencySectionCompilesAndBehavesAsDescribed() async throws {
        let server = try WorkerThread(name: "server") {
            let port = try! LocalPort(name: "readme-concurrency-\(getpid())") { request in
                LoopMessage(id: 0, text: "pong for \(request.text ?? "")")
            }
            ThreadRunLoop.current.add(port, to: .default)
        }
        let remote = try RemotePort(named: "readme-concurrency-\(getpid())")

        let worker = try WorkerThread(name: "station")
        let onWorker = await Station(worker: worker).isOnItsWorker()   // true: the actor runs on the worker
        let answer = try await worker.submit { 6 * 7 }                    // suspends; no thread is blocked
        let reply = try await remote.request(LoopMessage(id: 1, text: "ping"))  // cancellable with its task

        XCTAssertTrue(onWorker)
        XCTAssertEqual(answer, 42)
        XCTAssertEqual(reply.text, "pong for ping")
        worker.stop()
        server.stop()
    }
}
