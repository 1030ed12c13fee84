import Dispatch
@testable import RunLoopCore
import RunLoopSystem
import RunLoopTestSupport
import XCTest

final class InputSourceTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    func testScheduleRunsOncePerModeAndCancelOncePerModeOnInvalidate() {
        var log: [String] = []
        let source = InputSource(
            schedule: { _, mode in log.append("schedule \(mode)") },
            cancel: { _, mode in log.append("cancel \(mode)") }
        ) {}
        loop.add(source, to: "a")
        loop.add(source, to: "a")
        loop.add(source, to: "b")
        XCTAssertEqual(log, ["schedule a", "schedule b"])
        log.removeAll()
        source.invalidate()
        XCTAssertEqual(log.sorted(), ["cancel a", "cancel b"])
        source.invalidate()
        XCTAssertEqual(log.count, 2, "invalidating twice cancels once")
    }

    func testRemovingASourceFromAModeCancelsItThere() {
        var log: [String] = []
        let source = InputSource(cancel: { _, mode in log.append("cancel \(mode)") }) {}
        loop.add(source, to: "x")
        loop.add(source, to: "y")
        loop.remove(source, from: "x")
        XCTAssertEqual(log, ["cancel x"])
        XCTAssertTrue(loop.contains(source, in: "y"))
        source.invalidate()
    }

    func testASourceSignalledManyTimesPerformsOncePerPass() {
        var performs = 0
        let source = InputSource { performs += 1 }
        loop.add(source, to: "many")
        for _ in 0..<100 { source.signal() }
        XCTAssertTrue(loop.run(mode: "many", before: .after(.seconds(10))))
        XCTAssertEqual(performs, 1)
        XCTAssertFalse(source.isSignalled)
        source.invalidate()
    }

    func testSourcesPerformInTheirOrder() {
        var log: [Int] = []
        let sources = [30, -1, 7, 7].enumerated().map { index, order in
            InputSource(order: order) { log.append(index) }
        }
        for source in sources {
            loop.add(source, to: "ordered-sources")
            source.signal()
        }
        XCTAssertTrue(loop.run(mode: "ordered-sources", before: .after(.seconds(10))))
        XCTAssertEqual(log, [1, 2, 3, 0])
        for source in sources { source.invalidate() }
    }

    func testASignalRaisedDuringPerformRunsInTheNextPass() {
        var performs = 0
        var source: InputSource!
        source = InputSource {
            performs += 1
            if performs == 1 { source.signal() }
        }
        loop.add(source, to: "resignal")
        source.signal()
        XCTAssertTrue(loop.run(mode: "resignal", before: .after(.seconds(10))))
        XCTAssertEqual(performs, 1)
        XCTAssertTrue(loop.run(mode: "resignal", before: .after(.seconds(10))))
        XCTAssertEqual(performs, 2)
        source.invalidate()
    }

    func testInvalidatingFromAnotherThreadCancelsOnTheLoopsThread() {
        let cancelledOnLoopThread = LockedValue<Bool?>(nil)
        let cancelled = DispatchSemaphore(value: 0)
        let source = LockedValue<InputSource?>(nil)
        let worker = LoopThread { loop in
            let created = InputSource(cancel: { loop, _ in
                cancelledOnLoopThread.withLock { $0 = loop.isOwnerThread }
                cancelled.signal()
            }) {}
            loop.add(created, to: .default)
            source.withLock { $0 = created }
        }
        source.withLock { $0 }!.invalidate()
        waitOrFail(cancelled, "the cancel callback")
        XCTAssertEqual(cancelledOnLoopThread.withLock { $0 }, true)
        worker.stop()
    }

    func testASourceInvalidatedOnAnotherThreadIsInNoModeBeforeItsCancelRuns() {
        var cancels = 0
        let source = InputSource(cancel: { _, _ in cancels += 1 }) {}
        loop.add(source, to: "invalidated-elsewhere")
        TestThread { source.invalidate() }.join()
        XCTAssertFalse(loop.contains(source, in: "invalidated-elsewhere"))
        XCTAssertEqual(cancels, 0, "the cancel callback waits for the loop's own thread")
        _ = loop.run(mode: "invalidated-elsewhere", timeout: .zero, returnAfterSourceHandled: false)
        XCTAssertEqual(cancels, 1)
    }

    func testSignalAndWakeUpFromManyThreadsLoseNothing() {
        let producers = 8
        let commandsEach = 2_000
        let buffer = LockedValue<[Int]>([])
        let processed = LockedValue<Int>(0)
        let allDone = DispatchSemaphore(value: 0)
        let sourceBox = LockedValue<InputSource?>(nil)
        let worker = LoopThread { loop in
            let source = InputSource {
                let commands = buffer.withLock { commands in
                    defer { commands.removeAll() }
                    return commands
                }
                let total = processed.withLock { count in
                    count += commands.count
                    return count
                }
                if total == producers * commandsEach { allDone.signal() }
            }
            loop.add(source, to: .default)
            sourceBox.withLock { $0 = source }
        }
        let source = sourceBox.withLock { $0 }!
        let threads = (0..<producers).map { producer in
            TestThread {
                for command in 0..<commandsEach {
                    buffer.withLock { $0.append(producer * commandsEach + command) }
                    source.signal()
                    worker.loop.wakeUp()
                }
            }
        }
        for thread in threads { thread.join() }
        waitOrFail(allDone, seconds: 30, "every command to be processed")
        XCTAssertEqual(processed.withLock { $0 }, producers * commandsEach)
        source.invalidate()
        worker.stop()
    }
}
