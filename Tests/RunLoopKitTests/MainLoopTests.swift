import Dispatch
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// The main thread's loop. XCTest runs tests on the main thread, as a tool's `main.swift` runs.
final class MainLoopTests: XCTestCase {
    override func setUp() {
        super.setUp()
        precondition(ThreadRunLoop.main.isOwnerThread, "MainLoop's tests must run on the main thread")
    }

    /// Runs the main loop as a tool would, with a safety net that ends it (and fails) if nothing does.
    private func runMainLoop(file: StaticString = #filePath, line: UInt = #line) {
        let safetyNet = Deadline.after(.seconds(30))
        MainLoop.perform(after: .seconds(30), tag: "safety net") { MainLoop.stop() }
        MainLoop.run()
        MainLoop.cancelPerformRequests(tagged: "safety net")
        XCTAssertLessThan(Deadline.now(), safetyNet, "the main loop ran until the safety net", file: file, line: line)
    }

    func testRunServicesTheMainThreadUntilAWorkerStopsIt() throws {
        let worker = try WorkerThread(name: "main-stopper")
        let log = EventLog()
        try worker.perform {
            MainLoop.perform { log.append(ThreadRunLoop.main.isOwnerThread ? "on main" : "elsewhere") }
            MainLoop.perform { MainLoop.stop() }
        }
        XCTAssertFalse(MainLoop.isRunning)
        runMainLoop()
        XCTAssertFalse(MainLoop.isRunning)
        XCTAssertEqual(log.all, ["on main"])
        worker.stop()
    }

    func testAStopBeforeRunMakesTheNextRunReturnAtOnceAndOnlyThatOne() throws {
        MainLoop.stop()
        MainLoop.run() // returns at once
        let worker = try WorkerThread(name: "main-stopper")
        let ran = SharedValue(false)
        try worker.perform {
            _ = try? MainLoop.performAndWait { ran.withLock { $0 = true } }
            MainLoop.stop()
        }
        runMainLoop() // the earlier stop was consumed: this one runs until the worker's
        XCTAssertTrue(ran.withLock { $0 })
        worker.stop()
    }

    func testAStopOfTheLoopItselfDoesNotEndTheMainLoop() throws {
        let worker = try WorkerThread(name: "main-stopper")
        let log = EventLog()
        try worker.perform {
            ThreadRunLoop.main.stop() // ends one run; MainLoop runs again
            MainLoop.perform {
                log.append("still running")
                MainLoop.stop()
            }
        }
        runMainLoop()
        XCTAssertEqual(log.all, ["still running"])
        worker.stop()
    }

    func testPerformAndWaitFromAWorkerRunsOnTheMainThreadAndReturnsOnceItRan() throws {
        let worker = try WorkerThread(name: "main-caller")
        let outcome = SharedValue<(Bool, Bool, String)?>(nil)
        try worker.perform {
            let onMain = (try? MainLoop.performAndWait { ThreadRunLoop.main.isOwnerThread }) ?? false
            let flag = SharedValue(false)
            let returned: Void? = try? MainLoop.performAndWait { flag.withLock { $0 = true } }
            let error = (try? MainLoop.performAndWait { () throws -> Int in throw RunLoopError.cancelled }).map { _ in "none" } ?? "thrown"
            outcome.withLock { $0 = (onMain, flag.withLock { $0 } && returned != nil, error) }
            MainLoop.stop()
        }
        runMainLoop()
        let (onMain, waited, error) = try XCTUnwrap(outcome.withLock { $0 })
        XCTAssertTrue(onMain)
        XCTAssertTrue(waited)
        XCTAssertEqual(error, "thrown")
        worker.stop()
    }

    func testPerformAndWaitOnTheMainThreadItselfRunsAtOnce() throws {
        let ran = SharedValue(false)
        try MainLoop.performAndWait { ran.withLock { $0 = true } }
        XCTAssertTrue(ran.withLock { $0 })
        XCTAssertEqual(try MainLoop.performAndWait { 7 }, 7)
    }

    func testADelayedPerformOnTheMainThreadFromAWorkerRunsAndCanBeCancelled() throws {
        let worker = try WorkerThread(name: "main-delay")
        let log = EventLog()
        try worker.performAndWait {
            MainLoop.perform(after: .milliseconds(20), tag: "cancelled") { log.append("cancelled") }
            MainLoop.perform(after: .milliseconds(30), tag: "kept") { log.append("kept") }
            MainLoop.cancelPerformRequests(tagged: "cancelled")
            MainLoop.perform(after: .milliseconds(60)) {
                log.append("last")
                MainLoop.stop()
            }
        }
        runMainLoop()
        XCTAssertEqual(log.all, ["kept", "last"])
        worker.stop()
    }

    func testRunStoppingOnSignalsReturnsTheSignalThatStoppedItAndRestoresItsAction() throws {
        precondition(ThreadRunLoop.main.isOwnerThread, "runs the main loop")
        let worker = try WorkerThread(name: "terminator")
        // Sent while the main loop runs (a perform on it), so the relay is installed by then.
        try worker.perform { MainLoop.perform { kill(getpid(), SIGTERM) } }
        MainLoop.perform(after: .seconds(30), tag: "safety net") { MainLoop.stop() }
        let stoppedBy = try MainLoop.run(stoppingOn: [.interrupt, .terminate])
        MainLoop.cancelPerformRequests(tagged: "safety net")
        XCTAssertEqual(stoppedBy, .terminate)
        XCTAssertFalse(SignalRelay.isInstalled(.terminate), "SIGTERM's default action is back")
        XCTAssertFalse(SignalRelay.isInstalled(.interrupt))
        XCTAssertFalse(MainLoop.isRunning)
        worker.stop()
    }
}
