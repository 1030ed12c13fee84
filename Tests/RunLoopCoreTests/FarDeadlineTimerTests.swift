import CLinuxPoll
import Glibc
@testable import RunLoopCore
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// The far-deadline timer on its own: when it arms the kernel's timerfd, when it keeps an
/// earlier arming, and what firing and closing do, read back from the kernel
/// (`timerfd_gettime`, `poll`, `fcntl`).
final class FarDeadlineTimerTests: XCTestCase {
    /// What the kernel has the timer armed for: the time left, nil if disarmed.
    private func timeLeft(_ timer: FarDeadlineTimer) -> Duration? {
        var value = itimerspec()
        XCTAssertEqual(timerfd_gettime(timer.descriptor, &value), 0)
        guard value.it_value.tv_sec != 0 || value.it_value.tv_nsec != 0 else { return nil }
        return .seconds(value.it_value.tv_sec) + .nanoseconds(value.it_value.tv_nsec)
    }

    private func isReadable(_ timer: FarDeadlineTimer) -> Bool {
        var entry = pollfd(fd: timer.descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 1 && entry.revents & Int16(POLLIN) != 0
    }

    func testANewTimerIsANonBlockingCloseOnExecTimerfdThatIsNotArmed() throws {
        let timer = try FarDeadlineTimer()
        defer { timer.close() }
        XCTAssertNil(timeLeft(timer))
        XCTAssertFalse(isReadable(timer))
        XCTAssertNotEqual(fcntl(timer.descriptor, F_GETFL) & O_NONBLOCK, 0, "reading it after a wake-up never blocks")
        XCTAssertNotEqual(fcntl(timer.descriptor, F_GETFD) & FD_CLOEXEC, 0, "not inherited by child processes")
    }

    func testArmingSetsTheKernelTimerToTheDeadline() throws {
        var timer = try FarDeadlineTimer()
        defer { timer.close() }
        try timer.fire(atOrBefore: .after(.seconds(100)))
        let left = try XCTUnwrap(timeLeft(timer))
        XCTAssertTrue(left > .seconds(99) && left <= .seconds(100), "\(left)")
        XCTAssertFalse(isReadable(timer))
    }

    func testALaterDeadlineKeepsTheEarlierArmingAndAnEarlierOneReplacesIt() throws {
        var timer = try FarDeadlineTimer()
        defer { timer.close() }
        let first = Deadline.after(.seconds(100))
        try timer.fire(atOrBefore: first)
        try timer.fire(atOrBefore: first + .seconds(100))
        var left = try XCTUnwrap(timeLeft(timer))
        XCTAssertLessThanOrEqual(left, .seconds(100), "kept: a stream of requests re-arms about once per timeout")
        try timer.fire(atOrBefore: first)
        left = try XCTUnwrap(timeLeft(timer))
        XCTAssertLessThanOrEqual(left, .seconds(100))
        try timer.fire(atOrBefore: first + .seconds(-50))
        left = try XCTUnwrap(timeLeft(timer))
        XCTAssertTrue(left > .seconds(49) && left <= .seconds(50), "re-armed earlier: \(left)")
    }

    func testADeadlineAlreadyPassedMakesTheDescriptorReadableAndFiredClearsItAndForgetsTheArming() throws {
        var timer = try FarDeadlineTimer()
        defer { timer.close() }
        try timer.fire(atOrBefore: .now() + .milliseconds(-1))
        XCTAssertTrue(isReadable(timer), "an absolute time in the past expires at once")
        XCTAssertNil(timeLeft(timer), "a one-shot timer that expired is disarmed")
        timer.fired()
        XCTAssertFalse(isReadable(timer), "its count was read: it no longer wakes the poll set")
        timer.fired() // nothing to read: EAGAIN, not a block
        XCTAssertFalse(isReadable(timer))

        // Fired, it keeps no arming: a later deadline arms it anew.
        try timer.fire(atOrBefore: .after(.seconds(200)))
        let left = try XCTUnwrap(timeLeft(timer))
        XCTAssertTrue(left > .seconds(199), "\(left)")
    }

    func testAfterFiredEvenALaterDeadlineThanTheLastArmingArmsTheTimer() throws {
        var timer = try FarDeadlineTimer()
        defer { timer.close() }
        try timer.fire(atOrBefore: .after(.seconds(100)))
        timer.fired() // as `Poller` does when the report comes
        try timer.fire(atOrBefore: .after(.seconds(300)))
        let left = try XCTUnwrap(timeLeft(timer))
        XCTAssertTrue(left > .seconds(299), "not kept at the old arming: \(left)")
    }

    func testClosingGivesTheDescriptorBack() throws {
        let before = ProcessResources.measure().descriptors
        let timer = try FarDeadlineTimer()
        XCTAssertGreaterThanOrEqual(fcntl(timer.descriptor, F_GETFD), 0)
        timer.close()
        XCTAssertEqual(fcntl(timer.descriptor, F_GETFD), -1)
        XCTAssertEqual(errno, EBADF)
        XCTAssertLessThanOrEqual(openDescriptors(settlingAtMost: before), before)
    }
}
