import Dispatch
import Foundation
import Glibc
@testable import RunLoopCore
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// Signal sources: signals sent with `kill(getpid(), …)` heard on each watching loop's thread.
/// (`MainLoop.run(stoppingOn:)`: `MainLoopTests` in RunLoopKitTests.)
final class SignalSourceTests: XCTestCase {
    private let mode = LoopMode("SignalSourceTests")

    /// The count an eventfd holds now, read from `/proc/self/fdinfo` without consuming it.
    private func eventfdCount(_ fd: Int32) -> UInt64? {
        guard let info = try? String(contentsOfFile: "/proc/self/fdinfo/\(fd)", encoding: .utf8) else { return nil }
        for line in info.split(separator: "\n") where line.hasPrefix("eventfd-count:") {
            return UInt64(line.dropFirst("eventfd-count:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        }
        return nil
    }

    /// Sends `signal` to the process and returns once the relay has counted it in `source`'s
    /// eventfd (so that two sends are never merged by the kernel as one pending signal).
    private func send(_ signal: Int32, countedIn source: SignalSource, file: StaticString = #filePath, line: UInt = #line) {
        let before = eventfdCount(source.descriptorSource.descriptor) ?? 0
        XCTAssertEqual(kill(getpid(), signal), 0, file: file, line: line)
        let limit = Deadline.after(.seconds(10))
        while (eventfdCount(source.descriptorSource.descriptor) ?? 0) <= before {
            guard Deadline.now() < limit else { return XCTFail("the delivery was never counted", file: file, line: line) }
            sched_yield()
        }
    }

    private func handlerAddress(_ signo: Int32) -> Int {
        var action = sigaction()
        XCTAssertEqual(sigaction(signo, nil, &action), 0)
        return unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self)
    }

    func testASignalSentWithKillReachesTheHandlerOnTheWatchingLoopsThread() throws {
        let watcher = LoopThread()
        let heard = DispatchSemaphore(value: 0)
        let onLoopThread = SharedValue<Bool?>(nil)
        let source = try SignalSource(.user1) { count in
            onLoopThread.withLock { $0 = ThreadRunLoop.current !== ThreadRunLoop.main && !ThreadRunLoop.isMainThread }
            XCTAssertEqual(count, 1)
            heard.signal()
        }
        try watcher.loop.performAndWait { ThreadRunLoop.current.add(source, to: .default) }
        XCTAssertEqual(kill(getpid(), SIGUSR1), 0)
        waitOrFail(heard, "the signal's handler")
        XCTAssertEqual(onLoopThread.withLock { $0 }, true, "called on the watching loop's thread")
        source.invalidate()
        watcher.stop()
    }

    func testDeliveriesWhileTheLoopIsNotRunningAreCoalescedIntoOneCallWithTheirCount() throws {
        let loop = ThreadRunLoop.current
        let counts = SharedValue<[Int]>([])
        let source = try SignalSource(.user2) { count in counts.withLock { $0.append(count) } }
        loop.add(source, to: mode)
        for _ in 0..<3 { send(SIGUSR2, countedIn: source) }
        XCTAssertTrue(loop.run(mode: mode, before: .after(.seconds(10))))
        XCTAssertEqual(counts.withLock { $0 }, [3], "three deliveries, one call")
        XCTAssertFalse(loop.run(mode: mode, before: .after(.milliseconds(20))), "nothing more")
        send(SIGUSR2, countedIn: source)
        XCTAssertTrue(loop.run(mode: mode, before: .after(.seconds(10))))
        XCTAssertEqual(counts.withLock { $0 }, [3, 1], "counted since the last call")
        source.invalidate()
    }

    func testTwoLoopsWatchingOneSignalEachHearEveryDeliveryOnTheirOwnThread() throws {
        let loop = ThreadRunLoop.current
        let watcher = LoopThread()
        let watcherHeard = DispatchSemaphore(value: 0)
        let log = EventLog()
        let onWatcher = try SignalSource(.user1) { count in
            log.append("watcher \(count) \(ThreadRunLoop.isMainThread ? "main" : "own thread")")
            watcherHeard.signal()
        }
        try watcher.loop.performAndWait { ThreadRunLoop.current.add(onWatcher, to: .default) }
        let onThisLoop = try SignalSource(.user1) { count in log.append("this loop \(count)") }
        loop.add(onThisLoop, to: mode)
        XCTAssertEqual(kill(getpid(), SIGUSR1), 0)
        waitOrFail(watcherHeard, "the watcher's handler")
        XCTAssertTrue(loop.run(mode: mode, before: .after(.seconds(10))))
        XCTAssertEqual(Set(log.all), ["watcher 1 own thread", "this loop 1"])
        onWatcher.invalidate()
        onThisLoop.invalidate()
        watcher.stop()
    }

    func testThePreviousActionIsRestoredWhenTheLastWatcherGoesAndNoDescriptorIsLeft() throws {
        let before = ProcessResources.measure().descriptors
        signal(SIGUSR2, SIG_IGN)
        defer { signal(SIGUSR2, SIG_DFL) }
        let ignore = handlerAddress(SIGUSR2)
        let first = try SignalSource(.user2) { _ in }
        let second = try SignalSource(.user2) { _ in }
        XCTAssertTrue(SignalRelay.isInstalled(.user2))
        first.invalidate()
        XCTAssertTrue(SignalRelay.isInstalled(.user2), "still watched by the second")
        second.invalidate()
        XCTAssertFalse(SignalRelay.isInstalled(.user2))
        XCTAssertEqual(handlerAddress(SIGUSR2), ignore, "SIG_IGN again, as before the first source")
        XCTAssertEqual(kill(getpid(), SIGUSR2), 0, "ignored, as before")
        XCTAssertEqual(ProcessResources.measure().descriptors, before, "both eventfds closed")
    }

    func testASourceOnNoLoopStopsWatchingWhenReleasedAndOneOnALoopIsKeptByItUntilInvalidated() throws {
        let loop = ThreadRunLoop.current
        do { _ = try SignalSource(.user2) { _ in } }
        XCTAssertFalse(SignalRelay.isInstalled(.user2), "released on no loop: stopped watching")
        let counts = SharedValue<[Int]>([])
        weak var kept: SignalSource?
        do {
            let source = try SignalSource(.user2) { count in counts.withLock { $0.append(count) } }
            loop.add(source, to: mode)
            kept = source
        }
        let source = try XCTUnwrap(kept, "the loop keeps it")
        send(SIGUSR2, countedIn: source)
        XCTAssertTrue(loop.run(mode: mode, before: .after(.seconds(10))))
        XCTAssertEqual(counts.withLock { $0 }, [1])
        source.invalidate()
        XCTAssertFalse(SignalRelay.isInstalled(.user2))
        XCTAssertFalse(loop.contains(source, in: mode))
    }

    func testSignalsThatCannotBeCaughtAreRefusedWithATypedError() {
        XCTAssertThrowsError(try SignalSource(UnixSignal(rawValue: SIGKILL)) { _ in }) { error in
            XCTAssertEqual((error as? SystemCallError)?.errno, EINVAL)
        }
        XCTAssertFalse(SignalRelay.isInstalled(UnixSignal(rawValue: SIGKILL)))
    }
}
