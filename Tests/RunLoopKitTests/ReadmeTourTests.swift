import Foundation // the tour's names must not collide with Foundation's
import RunLoopKit
import XCTest

/// The README's tour, kept compiling and true.
final class ReadmeTourTests: XCTestCase {
    func testTheReadmeTourCompilesAndBehavesAsDescribed() {
        // On a thread of its own: a fresh loop whose common modes no other test touches.
        TestThread {
            let log = EventLog()
            @Sendable func print(_ item: Any) { log.append("\(item)") }

            let loop = ThreadRunLoop.current              // this thread's loop, created on first use

            // A timer on a 100 ms grid, first firing 300 ms from now, allowed to be 5 ms late.
            let timer = LoopTimer(after: .milliseconds(300), repeating: .milliseconds(100),
                                  tolerance: .milliseconds(5)) { timer in print("tick") }
            loop.add(timer, to: .default)

            // An observer of every activity of the pass.
            loop.add(LoopObserver(activities: .all) { _, activity in print(activity) }, to: .default)

            // A custom input source: signalled from any thread, performed on this one.
            let source = InputSource(schedule: { loop, mode in print("scheduled in \(mode)") },
                                     cancel: { loop, mode in print("cancelled in \(mode)") }) {
                print("performed")
            }
            loop.add(source, to: .common)                 // every common mode, present and future

            // From another thread: signal the source and wake the loop, or run a closure there.
            source.signal(); loop.wakeUp()
            loop.perform { print("runs on the loop's thread") }

            // Run as CFRunLoopRunInMode does, and read why it returned.
            let result = loop.run(mode: .default, timeout: .seconds(1), returnAfterSourceHandled: true)
            // .finished, .stopped, .timedOut or .handledSource

            let printed = log.all
            XCTAssertEqual(result, .handledSource)
            XCTAssertEqual(printed, ["scheduled in default", "entry", "beforeTimers", "beforeSources",
                                     "runs on the loop's thread", "performed", "exit"])
            XCTAssertFalse(printed.contains("tick"), "the timer is not due yet")
            XCTAssertTrue(timer.isValid)
            // Foundation's names stay usable alongside.
            XCTAssertNotNil(RunLoop.current)
            _ = Timer(timeInterval: 1, repeats: false) { _ in }
            timer.invalidate()
            source.invalidate()
            XCTAssertEqual(log.all.last, "cancelled in default")
        }.join()
    }

    func testTheReadmePortsTourCompilesAndBehavesAsDescribed() throws {
        let loop = ThreadRunLoop.current

        // On the main thread: a port whose handler gets each worker's check-in.
        var workers: [RemotePort] = []
        let mainPort = try LocalPort { message in
            if message.id == 100, let workerPort = message.replyPort { workers.append(workerPort) }
            return nil                                // for a request, the reply
        }
        loop.add(mainPort, to: .default)

        let worker = LoopThread { _ in
            do {
                // On a worker thread, given `mainPort`: a port of its own, and the check-in.
                let workerPort = try LocalPort { job in LoopMessage(id: 2, text: "done: \(job.text ?? "")") }
                ThreadRunLoop.current.add(workerPort, to: .default)
                try mainPort.send(LoopMessage(id: 100, replyPort: workerPort.remote), timeout: .seconds(5))
            } catch {
                XCTFail("\(error)")
            }
        }
        let limit = Deadline.after(.seconds(20))
        while workers.isEmpty && Deadline.now() < limit { loop.run(mode: .default, before: limit) }
        XCTAssertEqual(workers.count, 1)
        let done = try workers[0].sendRequest(LoopMessage(id: 1, text: "job"))
        XCTAssertEqual(done.text, "done: job")

        // Named ports are found by name, in this process (inproc) or another (ipc):
        let named = try LocalPort(name: "com.example.server") { request in LoopMessage(id: 1, text: "pong") }
        loop.add(named, to: .default)
        let answered = SharedValue<LoopMessage?>(nil)
        let requester = TestThread {
            let reply = try? RemotePort(named: "com.example.server")
                .sendRequest(LoopMessage(id: 1, text: "ping"), sendTimeout: .seconds(1), receiveTimeout: .seconds(1))
            answered.withLock { $0 = reply }
            loop.perform {} // wakes the serving loop so that it sees the answer
        }
        while answered.withLock({ $0 }) == nil && Deadline.now() < limit { loop.run(mode: .default, before: limit) }
        requester.join()
        XCTAssertEqual(answered.withLock { $0 }?.text, "pong")
        named.invalidate()
        mainPort.invalidate()
        worker.stop()
    }
}
