import Dispatch
@testable import RunLoopCore
@testable import RunLoopKit
@testable import RunLoopSystem
@testable import RunLoopWire
@testable import RunLoopZMQ
import XCTest

/// Where a loop sleeps: on a futex while it has no port, in its poll set from its first port on.
final class PollerTests: XCTestCase {
    func testLoopsWithoutPortsHoldNoDescriptors() {
        let before = ProcessResources.measure().descriptors
        let loops = (0..<20).map { _ in ThreadRunLoop.makeForAdoption() }
        XCTAssertEqual(ProcessResources.measure().descriptors, before, "no epoll set or eventfd before a port")
        withExtendedLifetime(loops) {}
    }

    func testALoopAsleepOnItsFutexWakesForWorkFromAnotherThread() throws {
        let asleep = DispatchSemaphore(value: 0)
        let worker = LoopThread { loop in
            loop.add(LoopObserver(activities: .beforeWaiting, repeats: false) { _, _ in asleep.signal() }, to: .default)
        }
        waitOrFail(asleep, "the loop to go to sleep")
        XCTAssertEqual(try worker.loop.performAndWait { 42 }, 42)
        worker.stop()
    }

    func testALoopThatGainsItsFirstPortAfterSleepingWakesForItsMessagesAndForWork() throws {
        let sleeps = DispatchSemaphore(value: 0)
        let received = DispatchSemaphore(value: 0)
        let worker = LoopThread { loop in
            loop.add(LoopObserver(activities: .beforeWaiting) { _, _ in sleeps.signal() }, to: .default)
        }
        waitOrFail(sleeps, "the first sleep, on the futex")
        let port = try worker.loop.performAndWait { () -> LocalPort in
            let port = try LocalPort { _ in
                received.signal()
                return nil
            }
            ThreadRunLoop.current.add(port, to: .default)
            return port
        }
        waitOrFail(sleeps, "a sleep in the poll set")
        try port.remote.send(LoopMessage(id: 7), timeout: .seconds(5))
        waitOrFail(received, "the message")
        XCTAssertEqual(try worker.loop.performAndWait { 42 }, 42, "a wake-up reaches a loop asleep in its poll set")
        try worker.loop.performAndWait { port.invalidate() }
        worker.stop()
    }

    // MARK: - Far deadlines (a timerfd instead of a timeout per sleep)

    /// A port makes the loop sleep in its poll set; `mode` holds only that port.
    private func loopWithPortOnly(in mode: LoopMode) throws -> (ThreadRunLoop, LocalPort) {
        let loop = ThreadRunLoop.current
        let port = try LocalPort { _ in nil }
        loop.add(port, to: mode)
        return (loop, port)
    }

    func testARunWithAFarDeadlineTimesOutAtItNotBefore() throws {
        let mode = LoopMode("poller-far-\(#line)")
        let (loop, port) = try loopWithPortOnly(in: mode)
        defer { port.invalidate() }
        let start = Deadline.now()
        XCTAssertEqual(loop.run(mode: mode, timeout: .milliseconds(60), returnAfterSourceHandled: true), .timedOut)
        XCTAssertGreaterThanOrEqual(Deadline.now() - start, .milliseconds(60))
    }

    func testATimerArmedForAnEarlierRunNeverWakesALaterRunBeforeItsOwnDeadline() throws {
        let mode = LoopMode("poller-far-\(#line)")
        let (loop, port) = try loopWithPortOnly(in: mode)
        defer { port.invalidate() }
        // The first run arms the timer for 40 ms ahead and returns at once for a message.
        try port.remote.send(LoopMessage(id: 1))
        XCTAssertEqual(loop.run(mode: mode, timeout: .milliseconds(40), returnAfterSourceHandled: true), .handledSource)
        // The second run's deadline is later: the timer still fires at the first's,
        // and the run must sleep on until its own.
        var wakeUps = 0
        let observer = LoopObserver(activities: .afterWaiting) { _, _ in wakeUps += 1 }
        loop.add(observer, to: mode)
        let start = Deadline.now()
        XCTAssertEqual(loop.run(mode: mode, timeout: .milliseconds(150), returnAfterSourceHandled: true), .timedOut)
        XCTAssertGreaterThanOrEqual(Deadline.now() - start, .milliseconds(150))
        XCTAssertEqual(wakeUps, 1, "the early firing is absorbed: one sleep, one wake-up at the run's own deadline")
        loop.remove(observer, from: mode)
    }

    func testAMessageWakesALoopAsleepUntilAFarDeadline() throws {
        let mode = LoopMode("poller-far-\(#line)")
        let (loop, port) = try loopWithPortOnly(in: mode)
        defer { port.invalidate() }
        let sender = TestThread { try? port.remote.send(LoopMessage(id: 2)) }
        XCTAssertEqual(loop.run(mode: mode, timeout: .seconds(30), returnAfterSourceHandled: true), .handledSource)
        sender.join()
    }
}
