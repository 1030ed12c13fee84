import Dispatch
import Foundation // the tour's names must not collide with Foundation's
import RunLoopKit
import RunLoopTestSupport
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
            // .finished, .stopped, .timedOut, .handledSource, or .failed(error) if the kernel refused the sleep

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

    func testTheReadmeSourcesTourCompilesAndBehavesAsDescribed() throws {
        precondition(ThreadRunLoop.current.isMain, "the tour's last part runs the main loop")
        let loop = ThreadRunLoop.current
        let log = EventLog()
        @Sendable func print(_ item: Any) { log.append("\(item)") }
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(nonBlockingPipe(&fds), 0)
        let (readEnd, writeEnd) = (fds[0], fds[1])
        defer { close(readEnd); close(writeEnd) }
        let pid = spawnChild(["/bin/sh", "-c", "exit 7"])

        // Any descriptor (a socket, a pipe, inotify, a device), level-triggered, in modes.
        let input = DescriptorSource(descriptor: readEnd, watching: .readable) { event in
            if case .ready(let events) = event { print("ready: \(events)") }   // read what is there
        }
        loop.add(input, to: .default)
        input.disable()                               // stays in its modes; applied before the next sleep
        input.enable()

        // A UNIX signal, on this loop's thread, with the deliveries since the last call.
        let reload = try SignalSource(.hangUp) { count in print("SIGHUP x\(count)") }
        loop.add(reload, to: .default)

        // A child process's end (a pidfd): its exit status or the signal that killed it.
        let child = try ChildProcessSource(pid: pid) { exit in print("child \(exit)") }
        loop.add(child, to: .default)

        // (What the tour waits for: a byte in the pipe, a SIGHUP, the child's exit 7.)
        var byte: UInt8 = 1
        XCTAssertEqual(write(writeEnd, &byte, 1), 1)
        XCTAssertEqual(kill(getpid(), SIGHUP), 0)
        XCTAssertTrue(runCurrentLoop { log.all.contains("ready: [readable]") && log.all.contains("SIGHUP x1")
                && log.all.contains("child exited with status 7") })
        input.invalidate()
        reload.invalidate()

        // The main thread's loop runs DispatchQueue.main work and @MainActor code, and a tool
        // stops cleanly on Ctrl-C or SIGTERM in one line.
        DispatchQueue.main.async { print("main queue, on the main thread") }
        Task { @MainActor in print("main actor, on the main thread") }
        DispatchQueue.main.async { kill(getpid(), SIGTERM) } // (the tour's Ctrl-C)
        try MainLoop.run(stoppingOn: [.interrupt, .terminate])

        XCTAssertTrue(log.all.contains("main queue, on the main thread"))
        XCTAssertTrue(log.all.contains("main actor, on the main thread"))
    }
}
