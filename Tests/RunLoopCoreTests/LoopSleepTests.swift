import CLinuxPoll
import Dispatch
import Foundation
@testable import RunLoopCore
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// Where a loop sleeps: on a futex while it has no port, in its poll set from its first port on.
/// (The port is a `FakePort`: any port source moves the loop to its poll set.)
final class LoopSleepTests: XCTestCase {
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
        let port = try worker.loop.performAndWait { () -> FakePort in
            let port = try FakePort { _ in received.signal() }
            ThreadRunLoop.current.addItem(.port(port), binding: nil, to: .default)
            return port
        }
        waitOrFail(sleeps, "a sleep in the poll set")
        port.send()
        waitOrFail(received, "the message")
        XCTAssertEqual(try worker.loop.performAndWait { 42 }, 42, "a wake-up reaches a loop asleep in its poll set")
        try worker.loop.performAndWait { ThreadRunLoop.current.removeEverywhere(.port(port)) }
        worker.stop()
    }

    // MARK: - Timer slack

    /// The kernel may make a timed sleep later by the thread's timer slack (50 µs by default);
    /// a loop's thread sleeps with 1 µs, set before its first timed sleep, so a timer is late
    /// by its own tolerance only. (Without the setting, this thread keeps the 50 µs it is given.)
    func testALoopSleepsUntilItsTimerWithOneMicrosecondOfTimerSlack() throws {
        let fired = DispatchSemaphore(value: 0)
        let slackAtFire = LockedValue<Int>(0)
        let worker = LoopThread()
        try worker.loop.performAndWait {
            XCTAssertEqual(clinux_set_timer_slack(50_000), 0, "the kernel's default, as a thread starts with")
            let timer = LoopTimer(after: .milliseconds(5)) { _ in
                slackAtFire.withLock { $0 = clinux_get_timer_slack() }
                fired.signal()
            }
            ThreadRunLoop.current.add(timer, to: .default)
        }
        waitOrFail(fired, "the timer")
        XCTAssertEqual(slackAtFire.withLock { $0 }, 1_000, "the loop slept until its timer with 1 µs of slack")
        worker.stop()
    }

    // MARK: - Far deadlines (a timerfd instead of a timeout per sleep)

    /// A port makes the loop sleep in its poll set; `mode` holds only that port.
    private func loopWithPortOnly(in mode: LoopMode) throws -> (ThreadRunLoop, FakePort) {
        let loop = ThreadRunLoop.current
        let port = try FakePort()
        loop.addItem(.port(port), binding: nil, to: mode)
        return (loop, port)
    }

    func testARunWithAFarDeadlineTimesOutAtItNotBefore() throws {
        let mode = LoopMode("poller-far-\(#line)")
        let (loop, port) = try loopWithPortOnly(in: mode)
        defer { loop.removeEverywhere(.port(port)) }
        let start = Deadline.now()
        XCTAssertEqual(loop.run(mode: mode, timeout: .milliseconds(60), returnAfterSourceHandled: true), .timedOut)
        XCTAssertGreaterThanOrEqual(Deadline.now() - start, .milliseconds(60))
    }

    /// How long each timerfd of this process has left before it fires, by descriptor, read
    /// from the kernel (`/proc/self/fdinfo`); zero for a disarmed one.
    private func timerfds() -> [Int32: Duration] {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        var timers: [Int32: Duration] = [:]
        for name in descriptors {
            guard let fd = Int32(name),
                  (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")) == "anon_inode:[timerfd]",
                  let info = try? String(contentsOfFile: "/proc/self/fdinfo/\(fd)", encoding: .utf8),
                  let line = info.split(separator: "\n").first(where: { $0.hasPrefix("it_value:") })
            else { continue }
            let numbers = line.split { !$0.isNumber }.compactMap { Int64($0) } // "it_value: (seconds, nanoseconds)"
            guard numbers.count == 2 else { continue }
            timers[fd] = .seconds(numbers[0]) + .nanoseconds(numbers[1])
        }
        return timers
    }

    func testATimerArmedForAnEarlierRunNeverWakesALaterRunBeforeItsOwnDeadline() throws {
        let mode = LoopMode("poller-far-\(#line)")
        let (loop, port) = try loopWithPortOnly(in: mode)
        defer { loop.removeEverywhere(.port(port)) }
        // The first run goes to sleep with a far deadline (at least 10 ms away: the timerfd
        // is armed for it), and a message from another thread wakes it long before.
        let firstTimeout = Duration.milliseconds(300)
        let asleep = DispatchSemaphore(value: 0)
        loop.add(LoopObserver(activities: .beforeWaiting, repeats: false) { _, _ in asleep.signal() }, to: mode)
        let sender = TestThread {
            waitOrFail(asleep, "the first run to go to sleep")
            port.send()
        }
        let firstDeadline = Deadline.after(firstTimeout)
        XCTAssertEqual(loop.run(mode: mode, until: firstDeadline, returnAfterSourceHandled: true), .handledSource)
        sender.join()
        // The loop's timerfd, read back from the kernel: armed for the first run's deadline.
        // (Found by its descriptor: other timerfds of the process may be armed as far away.)
        let left = firstDeadline - Deadline.now()
        let timerfd = try XCTUnwrap(loop.poller.farDeadlineTimerDescriptor, "the first run's far deadline made the timerfd")
        let armedFor = try XCTUnwrap(timerfds()[timerfd], "the loop's timerfd is among the process's")
        XCTAssertLessThan(abs((armedFor - left) / .milliseconds(1)), 5,
                          "the loop's timerfd armed for the first run's deadline (\(left) away): \(armedFor)")
        // The second run, in a mode where nothing else can happen (a timer a minute away keeps
        // it from being empty), has a later deadline: the timerfd still fires at the first's,
        // and the run must sleep on until its own.
        let quiet = LoopMode("poller-quiet-\(#line)")
        let keepsTheModeNonEmpty = LoopTimer(after: .seconds(60)) { _ in XCTFail("a minute passed") }
        loop.add(keepsTheModeNonEmpty, to: quiet)
        defer { keepsTheModeNonEmpty.invalidate() }
        var wakeUps: [Deadline] = []
        let observer = LoopObserver(activities: .afterWaiting) { _, _ in wakeUps.append(.now()) }
        loop.add(observer, to: quiet)
        defer { loop.remove(observer, from: quiet) }
        // The wake-ups these changes to the loop left pending are taken first, without a sleep.
        XCTAssertEqual(loop.run(mode: quiet, timeout: .zero, returnAfterSourceHandled: true), .timedOut)
        wakeUps.removeAll()
        let secondDeadline = Deadline.after(.milliseconds(600))
        XCTAssertEqual(loop.run(mode: quiet, until: secondDeadline, returnAfterSourceHandled: true), .timedOut)
        XCTAssertGreaterThanOrEqual(Deadline.now(), secondDeadline)
        XCTAssertGreaterThan(secondDeadline, firstDeadline + .milliseconds(100), "the first run's deadline came during the second")
        // The wake-up the promise is about is the one the timerfd would cause at the first
        // run's deadline. (A real port, in the other mode, may wake the loop right after the
        // first run: libzmq signals its descriptor for its own commands too.)
        let offsets = wakeUps.map { $0 - firstDeadline }
        XCTAssertFalse(wakeUps.contains { $0.rawValue + 50_000_000 >= firstDeadline.rawValue && $0 < secondDeadline },
                       "no wake-up between the first run's deadline and the second's: wake-ups at \(offsets) from the first's")
        XCTAssertGreaterThanOrEqual(wakeUps.last ?? .now(), secondDeadline, "the last sleep ends at the run's own deadline")
        XCTAssertEqual(timerfds()[timerfd], .zero, "the timerfd fired and was not armed again")
    }

    func testAMessageWakesALoopAsleepUntilAFarDeadline() throws {
        let mode = LoopMode("poller-far-\(#line)")
        let (loop, port) = try loopWithPortOnly(in: mode)
        defer { loop.removeEverywhere(.port(port)) }
        let sender = TestThread { port.send() }
        XCTAssertEqual(loop.run(mode: mode, timeout: .seconds(30), returnAfterSourceHandled: true), .handledSource)
        sender.join()
    }
}
