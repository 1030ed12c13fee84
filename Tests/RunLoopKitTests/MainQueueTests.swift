import Dispatch
import Foundation
import Glibc
@testable import RunLoopCore // for core internals it reads: the main loop's descriptors and pass counts
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// Dispatch's main queue, `@MainActor` work and `await MainActor.run` on the main thread's
/// loop (`ThreadRunLoop+MainQueue`). XCTest runs tests on the main thread, as a tool's
/// `main.swift` runs, so these run the real main loop.
final class MainQueueTests: XCTestCase {
    override func setUp() {
        super.setUp()
        precondition(ThreadRunLoop.main.isOwnerThread, "the main queue's tests must run on the main thread")
    }

    /// Runs the main loop as a tool would, with a safety net that ends it (and fails) if nothing does.
    private func runMainLoop(file: StaticString = #filePath, line: UInt = #line) {
        let safetyNet = Deadline.after(.seconds(30))
        MainLoop.perform(after: .seconds(30), tag: "safety net") { MainLoop.stop() }
        MainLoop.run()
        MainLoop.cancelPerformRequests(tagged: "safety net")
        XCTAssertLessThan(Deadline.now(), safetyNet, "the main loop ran until the safety net", file: file, line: line)
    }

    private static var onMainThread: Bool { ThreadRunLoop.isMainThread }

    func testMainQueueWorkFromAWorkerRunsOnTheMainThreadInFIFOOrderUnderMainLoopRun() throws {
        let worker = try WorkerThread(name: "main-queuer")
        let order = SharedValue<[Int]>([])
        let offMain = SharedValue(0)
        try worker.perform {
            for index in 0..<200 {
                DispatchQueue.main.async {
                    if !MainQueueTests.onMainThread { offMain.withLock { $0 += 1 } }
                    order.withLock { $0.append(index) }
                    if index == 199 { MainLoop.stop() }
                }
            }
        }
        runMainLoop()
        XCTAssertEqual(order.withLock { $0 }, Array(0..<200), "every block ran, first queued first")
        XCTAssertEqual(offMain.withLock { $0 }, 0, "all on the main thread")
        worker.stop()
    }

    func testMainQueueBlocksAndPerformsInterleaveOnTheMainLoop() throws {
        // Each main-queue block queues a perform, which queues the next block: a strict
        // alternation shows both kinds served by the same loop, neither starving the other.
        let log = EventLog()
        @Sendable func block(_ round: Int) {
            log.append("queue \(round)")
            MainLoop.perform {
                log.append("perform \(round)")
                if round == 9 { MainLoop.stop() } else { DispatchQueue.main.async { block(round + 1) } }
            }
        }
        DispatchQueue.main.async { block(0) }
        runMainLoop()
        XCTAssertEqual(log.all, (0..<10).flatMap { ["queue \($0)", "perform \($0)"] })
    }

    func testTheMainQueueIsServicedOnlyWhenTheMainLoopRunsInACommonMode() {
        let loop = ThreadRunLoop.main
        let privateMode = LoopMode("MainQueueTests.private")
        let ran = SharedValue(false)
        DispatchQueue.main.async { ran.withLock { $0 = true } }
        // A private mode (not common): the block waits, and the loop does not spin on the
        // ready eventfd meanwhile.
        let timer = LoopTimer(fireAt: .after(.milliseconds(50))) { _ in }
        loop.add(timer, to: privateMode)
        let passesBefore = loop.instruments.passes
        XCTAssertEqual(loop.run(mode: privateMode, until: .after(.seconds(10)), returnAfterSourceHandled: false), .finished)
        XCTAssertFalse(ran.withLock { $0 }, "not serviced in a mode that is not common")
        XCTAssertLessThan(loop.instruments.passes - passesBefore, 10, "the ready eventfd did not make the loop spin")
        // The same mode made common services it.
        loop.addCommonMode(privateMode)
        let keep = LoopTimer(fireAt: .after(.seconds(10))) { _ in }
        loop.add(keep, to: privateMode)
        XCTAssertTrue(loop.run(mode: privateMode, before: .after(.seconds(10))))
        XCTAssertTrue(ran.withLock { $0 }, "serviced once the mode is common")
        keep.invalidate()
    }

    func testAnotherThreadsLoopNeverDrainsTheMainQueue() throws {
        let ran = SharedValue<Bool?>(nil)
        DispatchQueue.main.async { ran.withLock { $0 = MainQueueTests.onMainThread } }
        // A worker's loop runs its default (common) mode for a while: the block stays queued.
        let worker = try WorkerThread(name: "not-main")
        let workerSawIt = try worker.performAndWait { () -> Bool in
            let loop = ThreadRunLoop.current
            _ = loop.run(mode: .default, until: .after(.milliseconds(50)), returnAfterSourceHandled: false)
            return loop.descriptors.mainQueue != nil
        }
        worker.stop()
        XCTAssertFalse(workerSawIt, "a worker's loop never registers the main queue")
        XCTAssertNil(ran.withLock { $0 }, "not run while only another thread's loop ran")
        XCTAssertTrue(runCurrentLoop { ran.withLock { $0 } != nil })
        XCTAssertEqual(ran.withLock { $0 }, true, "run by the main loop, on the main thread")
    }

    func testMainActorTasksAndMainActorRunFromAWorkerRunOnTheMainThreadUnderMainLoopRun() throws {
        let log = EventLog()
        Task { @MainActor in
            log.append(MainQueueTests.onMainThread ? "task on main" : "task elsewhere")
        }
        let worker = try WorkerThread(name: "main-actor-caller")
        try worker.perform {
            Task.detached {
                let onMain = await MainActor.run { MainQueueTests.onMainThread }
                log.append(onMain ? "MainActor.run on main" : "MainActor.run elsewhere")
                await MainActor.run { MainLoop.stop() }
            }
        }
        runMainLoop()
        XCTAssertEqual(Set(log.all), ["task on main", "MainActor.run on main"])
        worker.stop()
    }

    func testMainLoopRunWithABodyRunsItOnTheMainActorAndStopsWhenItReturns() throws {
        let log = EventLog()
        let worker = try WorkerThread(name: "async-helper")
        try MainLoop.run {
            log.append(MainQueueTests.onMainThread ? "body on main" : "body elsewhere")
            let fromWorker = try await worker.submit { ThreadRunLoop.current.isMain ? "main" : "worker" }
            log.append("awaited \(fromWorker)")
            log.append(MainQueueTests.onMainThread ? "resumed on main" : "resumed elsewhere")
        }
        XCTAssertEqual(log.all, ["body on main", "awaited worker", "resumed on main"])
        XCTAssertFalse(MainLoop.isRunning)
        worker.stop()
    }

    func testARunNestedInAMainQueueBlockDoesNotDrainTheQueueAgainNorSpin() {
        let loop = ThreadRunLoop.main
        let log = EventLog()
        let passesInNestedRun = SharedValue(0)
        DispatchQueue.main.async {
            log.append("outer block")
            DispatchQueue.main.async { log.append("inner block") }
            let timer = LoopTimer(fireAt: .after(.milliseconds(40))) { _ in log.append("nested timer") }
            loop.add(timer, to: .default)
            let before = loop.instruments.passes
            _ = loop.run(mode: .default, until: .after(.seconds(10)), returnAfterSourceHandled: false)
            passesInNestedRun.withLock { $0 = loop.instruments.passes - before }
        }
        XCTAssertTrue(runCurrentLoop { log.all.count == 3 })
        XCTAssertEqual(log.all, ["outer block", "nested timer", "inner block"])
        XCTAssertLessThan(passesInNestedRun.withLock { $0 }, 10, "the nested run slept instead of spinning on the queue's eventfd")
    }

    // MARK: - Programs whose main thread does not run the main loop (a probe process each)

    /// Runs `main-queue-probe <mode>` and returns its `key=value` lines.
    private func probe(_ mode: String) throws -> [String: String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try builtExecutable("main-queue-probe"))
        process.arguments = [mode]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "the probe exited cleanly")
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n")
        return Dictionary(lines.compactMap { line in
            let parts = line.split(separator: "=", maxSplits: 1)
            return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
        }, uniquingKeysWith: { $1 })
    }

    func testAnAsyncMainLosesTheMainThreadAtItsFirstAwaitAndTheMainLoopNeverRuns() throws {
        let facts = try probe("async-main")
        XCTAssertEqual(facts["body-starts-on-main-thread"], "true")
        XCTAssertEqual(facts["after-await-on-main-thread"], "false", "parked in dispatchMain() by Swift's runtime")
        XCTAssertEqual(facts["main-actor-on-main-thread"], "false", "@MainActor runs on Dispatch's threads")
        XCTAssertNil(facts["main-loop-perform-ran"])
        XCTAssertEqual(facts["main-loop-perform-state"], "cancelled", "the main thread's loop went with the thread")
    }

    func testAnAsyncMainThatCallsMainLoopRunBeforeItsFirstAwaitKeepsTheMainThreadForTheMainLoop() throws {
        let facts = try probe("async-main-handoff")
        XCTAssertEqual(facts["body-after-await-on-main-thread"], "true")
        XCTAssertEqual(facts["main-queue-on-main-thread"], "true")
        XCTAssertEqual(facts["main-actor-counter"], "21", "@MainActor state updated by the body")
        XCTAssertEqual(facts["main-loop-returned"], "true", "MainLoop.run(_:) returned when the body did")
    }

    func testDispatchMainEndsTheMainThreadSoTheMainQueueRunsElsewhereAndTheMainLoopNeverRuns() throws {
        let facts = try probe("dispatch-main")
        XCTAssertEqual(facts["main-queue-on-main-thread"], "false")
        XCTAssertNil(facts["main-loop-perform-ran"])
        XCTAssertEqual(facts["main-loop-perform-state"], "cancelled")
    }

    // MARK: - The main loop's first run in a common mode (a probe process each, so that it is the first)

    func testTheMainLoopsFirstRunAfterABlockingRequestHandlesNothingOfTheUsersAndTimesOut() throws {
        let facts = try probe("request-then-run")
        XCTAssertEqual(facts["run-result"], "timedOut",
                       "no main-queue work and no source of the user's: the run is not ended by the library's plumbing")
    }

    func testMainQueueWorkQueuedBeforeTheMainLoopFirstRunsRunsInItsFirstRunAsAHandledSource() throws {
        let facts = try probe("queued-then-run")
        XCTAssertEqual(facts["queued-work-ran"], "true")
        XCTAssertEqual(facts["run-result"], "handledSource")
    }
}
