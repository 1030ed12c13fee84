import Foundation // the tour's names must not collide with Foundation's
import RunLoopKit
import RunLoopTestSupport
import XCTest

/// The README's "Worker threads" section, kept compiling and true.
final class ReadmeWorkersTests: XCTestCase {
    func testTheReadmeWorkerThreadsSectionCompilesAndBehavesAsDescribed() throws {
        let log = EventLog()
        @Sendable func print(_ item: Any) { log.append("\(item)") }

        // A resident thread: it sleeps on its run loop until work is handed to it.
        let worker = try WorkerThread(name: "network")
        try worker.perform { print("runs on the worker") }               // fire and forget
        let answer = try worker.performAndWait { 6 * 7 }                // waits; rethrows the closure's errors
        try worker.performAndWait { print("done before this returns") }
        try worker.perform(after: .seconds(1), tag: "retry") { print("a second later") }
        worker.cancelPerformRequests(tagged: "retry")
        worker.stop()                                                   // runs what is queued, joins the thread
        // worker.perform { … } now throws RunLoopError.stopped

        // A pool whose threads check in over ports as they start.
        let pool = try WorkerPool(name: "jobs", count: 4, policy: .leastBusy)
        let sum = try pool.performAndWait { (1...100).reduce(0, +) }
        pool.stop()

        // A tool's main.swift: run the main thread's loop until the work is done.
        let tool = try WorkerThread(name: "tool")
        try tool.perform {
            // … the program's work …
            MainLoop.stop()                                          // from any thread
        }
        MainLoop.run()                                               // returns once stopped
        tool.stop()

        XCTAssertEqual(answer, 42)
        XCTAssertEqual(sum, 5050)
        XCTAssertEqual(log.all, ["runs on the worker", "done before this returns"])
        XCTAssertThrowsError(try worker.perform {}) { XCTAssertEqual($0 as? RunLoopError, .stopped) }
        // Foundation's names stay usable alongside.
        XCTAssertNotNil(Thread.current)
        _ = RunLoop.current
    }
}
