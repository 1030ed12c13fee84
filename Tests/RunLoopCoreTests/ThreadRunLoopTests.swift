import Dispatch
@testable import RunLoopCore
import RunLoopSystem
import RunLoopTestSupport
import XCTest

final class ThreadRunLoopTests: XCTestCase {
    // MARK: - One loop per thread

    func testCurrentIsTheSameLoopEveryTimeOnOneThread() {
        XCTAssertTrue(ThreadRunLoop.current === ThreadRunLoop.current)
        XCTAssertTrue(ThreadRunLoop.current.isOwnerThread)
    }

    func testEachThreadGetsItsOwnLoop() {
        let here = ThreadRunLoop.current
        let other = LockedValue<ThreadRunLoop?>(nil)
        TestThread { other.withLock { $0 = ThreadRunLoop.current } }.join()
        XCTAssertNotNil(other.withLock { $0 })
        XCTAssertFalse(other.withLock { $0 } === here)
        XCTAssertFalse(other.withLock { $0!.isOwnerThread })
    }

    func testMainIsTheMainThreadsLoopFromAnyThread() {
        let seenFromOtherThread = LockedValue<ThreadRunLoop?>(nil)
        TestThread { seenFromOtherThread.withLock { $0 = ThreadRunLoop.main } }.join()
        XCTAssertTrue(seenFromOtherThread.withLock { $0 } === ThreadRunLoop.main)
        XCTAssertTrue(ThreadRunLoop.main.isMain)
    }

    func testAThreadsLoopIsTornDownWhenTheThreadExits() {
        weak var weakLoop: ThreadRunLoop?
        let cancelled = EventLog()
        let loopBox = LockedValue<ThreadRunLoop?>(nil)
        let thread = TestThread {
            let loop = ThreadRunLoop.current
            let source = InputSource(cancel: { _, mode in cancelled.append("cancel \(mode)") }) {}
            loop.add(source, to: .default)
            loop.add(source, to: "custom")
            loop.add(LoopTimer(after: .seconds(100)) { _ in }, to: .default)
            loopBox.withLock { $0 = loop }
        }
        thread.join()
        weakLoop = loopBox.withLock { $0 }
        XCTAssertEqual(Set(cancelled.all), ["cancel default", "cancel custom"], "teardown cancels each mode once")
        let request = weakLoop!.perform {}
        XCTAssertEqual(request.state, .cancelled, "a torn-down loop refuses perform requests")
        loopBox.withLock { $0 = nil }
        XCTAssertNil(weakLoop, "nothing keeps a torn-down loop alive")
    }

    func testALoopMadeForAnotherThreadQueuesWorkUntilThatThreadAdoptsAndRunsIt() {
        let loop = ThreadRunLoop.makeForAdoption()
        XCTAssertFalse(loop.isOwnerThread, "no thread owns it yet")
        let log = EventLog()
        let requests = (0..<3).map { index in loop.perform { log.append("\(index)") } }
        loop.wakeUp() // before any thread sleeps in it: makes its first sleep return at once
        let seenThere = LockedValue<(owned: Bool, current: Bool, result: RunResult)?>(nil)
        TestThread {
            loop.adoptOnCallingThread()
            let source = InputSource {}
            loop.add(source, to: .default)
            let result = loop.run(mode: .default, timeout: .seconds(10), returnAfterSourceHandled: true)
            seenThere.withLock { $0 = (loop.isOwnerThread, ThreadRunLoop.current === loop, result) }
            source.invalidate()
        }.join()
        XCTAssertEqual(log.all, ["0", "1", "2"], "queued before the thread existed, run in order in its first pass")
        XCTAssertEqual(requests.map(\.state), [.done, .done, .done])
        let seen = seenThere.withLock { $0 }
        XCTAssertEqual(seen?.owned, true)
        XCTAssertEqual(seen?.current, true, "the adopted loop is the thread's current one")
        XCTAssertEqual(seen?.result, .handledSource)
        XCTAssertFalse(loop.isOwnerThread)
        XCTAssertEqual(loop.perform {}.state, .cancelled, "torn down when its adopting thread exited")
    }

    // MARK: - Run results

    func testRunningAnEmptyModeFinishesAtOnceWithoutTellingObservers() {
        let loop = ThreadRunLoop.current
        let log = EventLog()
        let observer = LoopObserver(activities: .all) { _, activity in log.append("\(activity)") }
        loop.add(observer, to: "empty-mode")
        XCTAssertEqual(loop.run(mode: "empty-mode", timeout: .seconds(5), returnAfterSourceHandled: false), .finished)
        XCTAssertEqual(log.all, [])
        XCTAssertFalse(loop.run(mode: "empty-mode", before: .after(.seconds(5))))
        observer.invalidate()
    }

    func testRunFinishesOnceTheLastTimerHasFired() {
        let loop = ThreadRunLoop.current
        var fired = 0
        loop.add(LoopTimer(after: .milliseconds(1)) { _ in fired += 1 }, to: "one-timer")
        XCTAssertEqual(loop.run(mode: "one-timer", timeout: .seconds(10), returnAfterSourceHandled: false), .finished)
        XCTAssertEqual(fired, 1)
    }

    func testRunTimesOutWhenNothingHappens() {
        let loop = ThreadRunLoop.current
        let timer = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(timer, to: "idle")
        XCTAssertEqual(loop.run(mode: "idle", timeout: .milliseconds(20), returnAfterSourceHandled: true), .timedOut)
        XCTAssertEqual(loop.run(mode: "idle", timeout: .zero, returnAfterSourceHandled: false), .timedOut)
        timer.invalidate()
    }

    func testRunReturnsHandledSourceAfterASignalledSource() {
        let loop = ThreadRunLoop.current
        var performed = 0
        let source = InputSource { performed += 1 }
        loop.add(source, to: "src")
        source.signal()
        XCTAssertEqual(loop.run(mode: "src", timeout: .seconds(10), returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(performed, 1)
        source.signal()
        XCTAssertTrue(loop.run(mode: "src", before: .after(.seconds(10))))
        XCTAssertEqual(performed, 2)
        source.invalidate()
    }

    func testATimerNeverCountsAsAHandledSource() {
        let loop = ThreadRunLoop.current
        var fired = 0
        let keepAlive = InputSource {}
        loop.add(keepAlive, to: "timer-only")
        loop.add(LoopTimer(after: .zero) { _ in fired += 1 }, to: "timer-only")
        XCTAssertEqual(loop.run(mode: "timer-only", timeout: .milliseconds(50), returnAfterSourceHandled: true), .timedOut)
        XCTAssertEqual(fired, 1)
        keepAlive.invalidate()
    }

    func testStopFromAnotherThreadEndsTheRunWithStopped() {
        let worker = LoopThread()
        let result = LockedValue<RunResult?>(nil)
        let done = DispatchSemaphore(value: 0)
        let ready = DispatchSemaphore(value: 0)
        worker.loop.perform {
            let loop = ThreadRunLoop.current
            let observer = LoopObserver(activities: .beforeWaiting, repeats: false) { _, _ in ready.signal() }
            loop.add(observer, to: "stoppable")
            loop.add(LoopTimer(after: .seconds(100)) { _ in }, to: "stoppable")
            let outcome = loop.run(mode: "stoppable", until: .distantFuture, returnAfterSourceHandled: false)
            result.withLock { $0 = outcome }
            done.signal()
        }
        waitOrFail(ready, "the nested run to sleep")
        worker.loop.stop()
        waitOrFail(done, "the stopped run to return")
        XCTAssertEqual(result.withLock { $0 }, .stopped)
        worker.stop()
    }

    func testAStopRequestedBeforeARunEndsThatRun() {
        let loop = ThreadRunLoop.current
        let timer = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(timer, to: "pre-stopped")
        loop.stop()
        XCTAssertEqual(loop.run(mode: "pre-stopped", timeout: .seconds(10), returnAfterSourceHandled: false), .stopped)
        XCTAssertEqual(loop.run(mode: "pre-stopped", timeout: .zero, returnAfterSourceHandled: false), .timedOut,
                       "the stop is consumed by one run")
        timer.invalidate()
    }

    func testTheLoopCannotRunInTheCommonPseudoMode() {
        let loop = ThreadRunLoop.current
        let timer = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(timer, to: .common)
        XCTAssertEqual(loop.run(mode: .common, timeout: .seconds(1), returnAfterSourceHandled: false), .finished)
        timer.invalidate()
    }

    func testRunUntilADateReturnsWhenTheDatePasses() {
        let loop = ThreadRunLoop.current
        let timer = LoopTimer(after: .seconds(100)) { _ in }
        loop.add(timer, to: .default)
        let deadline = Deadline.after(.milliseconds(30))
        loop.run(until: deadline)
        XCTAssertGreaterThanOrEqual(Deadline.now(), deadline)
        timer.invalidate()
    }

    // MARK: - Modes

    func testCurrentModeIsTheInnermostRunsMode() {
        let loop = ThreadRunLoop.current
        var seen: [LoopMode?] = []
        loop.add(LoopTimer(after: .zero) { _ in
            seen.append(loop.currentMode)
            loop.add(LoopTimer(after: .zero) { _ in seen.append(loop.currentMode) }, to: "inner")
            _ = loop.run(mode: "inner", timeout: .seconds(10), returnAfterSourceHandled: false)
            seen.append(loop.currentMode)
        }, to: "outer")
        XCTAssertNil(loop.currentMode)
        XCTAssertEqual(loop.run(mode: "outer", timeout: .seconds(10), returnAfterSourceHandled: false), .finished)
        XCTAssertEqual(seen, ["outer", "inner", "outer"])
        XCTAssertNil(loop.currentMode)
    }

    func testItemsOfOtherModesHoldTheirEventsUntilTheirModeRuns() {
        let loop = ThreadRunLoop.current
        var log: [String] = []
        let source = InputSource { log.append("source") }
        let timer = LoopTimer(after: .zero) { _ in log.append("timer") }
        let keepAlive = InputSource {}
        loop.add(source, to: "held")
        loop.add(timer, to: "held")
        loop.add(keepAlive, to: "other")
        source.signal()
        XCTAssertEqual(loop.run(mode: "other", timeout: .milliseconds(30), returnAfterSourceHandled: false), .timedOut)
        XCTAssertEqual(log, [], "nothing of mode 'held' ran in mode 'other'")
        XCTAssertTrue(source.isSignalled)
        XCTAssertEqual(loop.run(mode: "held", timeout: .seconds(10), returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(log, ["source", "timer"], "the held signal and the held timer both ran in one pass")
        source.invalidate()
        keepAlive.invalidate()
    }

    func testCommonItemsJoinEveryCommonModeIncludingOnesAddedLater() {
        // On a thread of its own: a fresh loop whose common modes no other test touches.
        TestThread {
            let loop = ThreadRunLoop.current
            var performed: [LoopMode?] = []
            let source = InputSource { performed.append(loop.currentMode) }
            loop.add(source, to: .common)
            XCTAssertTrue(loop.contains(source, in: .default))
            XCTAssertFalse(loop.contains(source, in: "tracking"))
            loop.addCommonMode("tracking")
            XCTAssertTrue(loop.contains(source, in: "tracking"))
            XCTAssertTrue(loop.commonModes.isSuperset(of: [.default, "tracking"]))
            source.signal()
            XCTAssertTrue(loop.run(mode: "tracking", before: .after(.seconds(10))))
            source.signal()
            XCTAssertTrue(loop.run(mode: .default, before: .after(.seconds(10))))
            XCTAssertEqual(performed, ["tracking", .default])
            loop.remove(source, from: .common)
            XCTAssertFalse(loop.contains(source, in: "tracking"))
            XCTAssertFalse(loop.contains(source, in: .default))
        }.join()
    }

    func testNestedRunsCanUseTheOuterRunsMode() {
        let loop = ThreadRunLoop.current
        var depthSeen: [Int] = []
        let inner = InputSource { depthSeen.append(2) }
        loop.add(inner, to: .default)
        loop.add(LoopTimer(after: .zero) { _ in
            depthSeen.append(1)
            inner.signal()
            XCTAssertEqual(loop.run(mode: .default, timeout: .seconds(10), returnAfterSourceHandled: true), .handledSource)
        }, to: .default)
        XCTAssertEqual(loop.run(mode: .default, timeout: .milliseconds(30), returnAfterSourceHandled: true), .timedOut)
        XCTAssertEqual(depthSeen, [1, 2])
        inner.invalidate()
    }

    // MARK: - Waking

    func testIsWaitingIsTrueOnlyWhileTheLoopSleeps() {
        let sleeping = DispatchSemaphore(value: 0)
        let worker = LoopThread { loop in
            loop.add(LoopObserver(activities: .beforeWaiting, repeats: false) { _, _ in sleeping.signal() }, to: .default)
        }
        waitOrFail(sleeping, "the loop to go to sleep")
        // Nothing can wake the loop now, so it must be seen waiting (bounded by a safety net).
        let limit = Deadline.after(.seconds(10))
        while !worker.loop.isWaiting && Deadline.now() < limit { sched_yield() }
        XCTAssertTrue(worker.loop.isWaiting)
        let seenWhileRunningWork = LockedValue<Bool?>(nil)
        XCTAssertNoThrow(try worker.loop.performAndWait { seenWhileRunningWork.withLock { $0 = worker.loop.isWaiting } })
        XCTAssertEqual(seenWhileRunningWork.withLock { $0 }, false)
        worker.stop()
    }

    func testWakeUpFromAnotherThreadEndsTheSleepWithoutHandlingASource() {
        let worker = LoopThread()
        let log = EventLog()
        let result = LockedValue<RunResult?>(nil)
        let asleep = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        worker.loop.perform {
            let loop = ThreadRunLoop.current
            var sleeps = 0
            let observer = LoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, activity in
                log.append("\(activity)")
                if activity == .beforeWaiting {
                    sleeps += 1
                    if sleeps == 1 { asleep.signal() } else { loop.stop() }
                }
            }
            loop.add(observer, to: "wake")
            loop.add(LoopTimer(after: .seconds(100)) { _ in }, to: "wake")
            result.withLock { $0 = loop.run(mode: "wake", until: .distantFuture, returnAfterSourceHandled: true) }
            observer.invalidate()
            done.signal()
        }
        waitOrFail(asleep)
        worker.loop.wakeUp()
        waitOrFail(done)
        XCTAssertEqual(log.all, ["beforeWaiting", "afterWaiting", "beforeWaiting", "afterWaiting"])
        XCTAssertEqual(result.withLock { $0 }, .stopped)
        worker.stop()
    }

    // MARK: - Signals

    func testSignalsInterruptingTheSleepNeverBreakTheRun() {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in } // no SA_RESTART: waits see EINTR
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0
        var previous = sigaction()
        XCTAssertEqual(sigaction(SIGUSR1, &action, &previous), 0)
        defer { sigaction(SIGUSR1, &previous, nil) }

        let outcome = LockedValue<(RunResult, Int, Bool)?>(nil)
        let asleep = DispatchSemaphore(value: 0)
        let thread = TestThread {
            let loop = ThreadRunLoop.current
            var fires = 0
            var early = false
            let timer = LoopTimer(after: .milliseconds(300)) { timer in
                fires += 1
                early = Deadline.now() < timer.fireDate
            }
            loop.add(timer, to: .default)
            loop.add(LoopObserver(activities: .beforeWaiting, repeats: false) { _, _ in asleep.signal() }, to: .default)
            let result = loop.run(mode: .default, timeout: .seconds(20), returnAfterSourceHandled: false)
            outcome.withLock { $0 = (result, fires, early) }
        }
        asleep.wait()
        var signals = 0
        while outcome.withLock({ $0 }) == nil && signals < 100_000 {
            pthread_kill(thread.handle, SIGUSR1)
            signals += 1
            sched_yield()
        }
        thread.join()
        let (result, fires, early) = outcome.withLock { $0 }!
        XCTAssertGreaterThan(signals, 10, "the sleep was interrupted many times")
        XCTAssertEqual(result, .finished, "the run ended because its only timer fired, not because of a signal")
        XCTAssertEqual(fires, 1)
        XCTAssertFalse(early)
    }

    // MARK: - Idle

    func testAnIdleLoopUsesNoCPUWhileWaitingOnAFarTimer() {
        let cpu = LockedValue<Duration?>(nil)
        TestThread {
            let loop = ThreadRunLoop.current
            let timer = LoopTimer(after: .seconds(3600)) { _ in }
            loop.add(timer, to: .default)
            let before = threadCPUTime()
            loop.run(until: .after(.seconds(1)))
            cpu.withLock { $0 = threadCPUTime() - before }
            timer.invalidate()
        }.join()
        let spent = cpu.withLock { $0 }!
        XCTAssertLessThan(spent, .milliseconds(20), "idle loop spent \(spent) of CPU in 1 s")
    }
}
