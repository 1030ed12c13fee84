import Dispatch
import Foundation // the section's names must not collide with Foundation's
import RunLoopKit
import RunLoopTestSupport
import XCTest

/// The README's "A server that answers from a pool" section, kept compiling and true: its
/// client runs on another thread once the server's name is registered, and stops the main
/// loop once answered.
final class ReadmePoolServerTests: XCTestCase {
    func testTheReadmePoolServerSectionCompilesAndItsClientGetsTheSquareFromAWorker() throws {
        let answeredOn = SharedValue<[String]>([])
        let client = SharedValue<Result<LoopMessage, any Error>?>(nil)
        let pool = try WorkerPool(name: "answers", count: 2)
        let server = try LocalPort(name: "com.example.squares", handling: .deferring { request, right in
            guard let right else { return }                   // a one-way message comes with no right
            try pool.perform(moving: right) { right in        // the right moves to a worker…
                let n = Int(request.text ?? "") ?? 0
                answeredOn.withLock { $0.append(pool.workers.contains { $0.loop.isOwnerThread } ? "worker" : "elsewhere") }
                right.reply(LoopMessage(id: 0, text: "\(n * n)"))  // …which answers, once
            }
        })
        ThreadRunLoop.current.add(server, to: .default)
        DispatchQueue.global().async {
            let outcome = Result { () throws -> LoopMessage in
                // A client, on another thread or in another process: an ordinary request.
                let square = try RemotePort(named: "com.example.squares")
                    .sendRequest(LoopMessage(id: 1, text: "12"), sendTimeout: .seconds(1), receiveTimeout: .seconds(5))
                // square.text == "144", with the request's id
                return square
            }
            client.withLock { $0 = outcome }
            MainLoop.stop()
        }
        try MainLoop.run(stoppingOn: [.interrupt, .terminate])   // the replies go out from this loop
        server.invalidate()
        pool.stop()

        let square = try XCTUnwrap(client.withLock { $0 }).get()
        XCTAssertEqual(square.text, "144")
        XCTAssertEqual(square.id, 1)
        XCTAssertEqual(answeredOn.withLock { $0 }, ["worker"])
        // Foundation's names stay usable alongside.
        _ = RunLoop.current
    }
}
