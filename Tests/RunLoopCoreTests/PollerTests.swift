import CLinuxPoll
import Glibc
@testable import RunLoopCore
import RunLoopSystem
import XCTest

/// Where a loop sleeps: what a wait reports, read back with `readyDescriptor(at:)`.
final class PollerTests: XCTestCase {
    private var descriptors: [Int32] = []

    override func tearDown() {
        descriptors.forEach { close($0) }
        descriptors = []
        super.tearDown()
    }

    /// An eventfd registered with `token`, readable once `signal` is true.
    private func registered(in poller: Poller, token: UInt64, signal: Bool) throws -> Int32 {
        let fd = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        XCTAssertGreaterThanOrEqual(fd, 0)
        descriptors.append(fd)
        try poller.register(fd, token: token, events: EPOLLIN.rawValue)
        if signal { XCTAssertEqual(eventfd_write(fd, 1), 0) }
        return fd
    }

    private func reported(by poller: Poller, count: Int) -> [UInt64: UInt32] {
        Dictionary(uniqueKeysWithValues: (0..<count).map { poller.readyDescriptor(at: $0) })
    }

    func testAWaitReportsEachReadyDescriptorAndNeitherTheWakeUpNorTheQuietOnes() throws {
        let poller = Poller()
        _ = try registered(in: poller, token: 11, signal: true)
        _ = try registered(in: poller, token: 12, signal: false)
        _ = try registered(in: poller, token: 13, signal: true)
        poller.wake() // the wake-up descriptor is the poller's own: never reported

        let count = try poller.wait(until: .distantFuture, poll: false)

        XCTAssertEqual(count, 2)
        let ready = reported(by: poller, count: count)
        XCTAssertEqual(Set(ready.keys), [11, 13])
        XCTAssertTrue(ready.values.allSatisfy { $0 & EPOLLIN.rawValue != 0 })
    }

    private func event(_ token: UInt64) -> epoll_event {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = token
        return event
    }

    func testTheRegisteredDescriptorsOfAWaitAreReportedInOrderWithoutThePollersOwn() {
        var events = [event(41), event(Poller.wakeToken), event(42), event(FarDeadlineTimer.token), event(43),
                      event(99)]

        let found = Poller.partition(&events, count: 5) // the sixth was not reported

        XCTAssertEqual(found.ready, 3)
        XCTAssertTrue(found.wokenUp)
        XCTAssertTrue(found.timerFired)
        XCTAssertEqual(events.prefix(3).map(\.data.u64), [41, 42, 43])
    }

    func testAWaitWithOnlyThePollersOwnDescriptorsReportsNone() {
        var events = [event(FarDeadlineTimer.token)]

        let found = Poller.partition(&events, count: 1)

        XCTAssertEqual(found.ready, 0)
        XCTAssertFalse(found.wokenUp)
        XCTAssertTrue(found.timerFired)
    }

    func testAWaitThatOnlyLooksReportsNothingWhenNothingIsReady() throws {
        let poller = Poller()
        _ = try registered(in: poller, token: 21, signal: false)

        XCTAssertEqual(try poller.wait(until: .distantFuture, poll: true), 0)
    }

    func testAWakeUpAloneEndsTheWaitWithNothingReported() throws {
        let poller = Poller()
        _ = try registered(in: poller, token: 31, signal: false)
        poller.wake()

        XCTAssertEqual(try poller.wait(until: .distantFuture, poll: false), 0)
    }
}
