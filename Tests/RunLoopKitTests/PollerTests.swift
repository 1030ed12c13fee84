import Dispatch
@testable import RunLoopKit
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
}
