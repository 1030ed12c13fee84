import Dispatch
import Glibc
@testable import RunLoopCore // for core internals it reads: the loop's pass counts
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// Introspection: a loop's snapshot and description list every mode and item it holds.
final class LoopSnapshotTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    private func uniqueMode(_ base: String) -> LoopMode { LoopMode("\(base)-\(UInt32.random(in: 0...UInt32.max))") }

    func testTheDescriptionListsEveryModeAndEveryItemAdded() throws {
        // On a thread of its own, since it changes the common modes.
        let described = LockedValue<(text: String, ids: [String: String])>(("", [:]))
        TestThread {
            let loop = ThreadRunLoop.current
            let source = InputSource(order: 3) {}
            let commonSource = InputSource(order: 7) {}
            let timer = LoopTimer(after: .seconds(100), repeating: .milliseconds(100), tolerance: .milliseconds(5)) { _ in }
            let observer = LoopObserver(activities: [.entry, .exit], repeats: false, order: 2) { _, _ in }
            let portName = "describe-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            let port = try! LocalPort(name: portName)
            loop.add(source, to: "work")
            loop.add(timer, to: "work")
            loop.add(observer, to: "work")
            loop.add(port, to: "work")
            loop.addCommonMode("tracking")
            loop.add(commonSource, to: .common)
            let ids: [String: AnyObject] = ["source": source, "common": commonSource, "timer": timer, "observer": observer, "port": port]
            let identities = ids.mapValues { LoopSnapshotFormatter.identity(ObjectIdentifier($0)) }
            described.withLock { $0 = (loop.description, identities.merging(["portName": portName]) { $1 }) }
            port.invalidate()
        }.join()
        let (text, ids) = described.withLock { $0 }
        let lines = text.split(separator: "\n").map(String.init)
        func line(containing needle: String) -> String? { lines.first { $0.contains(needle) } }

        XCTAssertTrue(text.hasPrefix("ThreadRunLoop(thread) {"), text)
        XCTAssertNotNil(line(containing: "common modes: [default, tracking]"), text)
        XCTAssertNotNil(line(containing: "running: no"), text)
        XCTAssertNotNil(line(containing: "mode work:"), text)
        XCTAssertNotNil(line(containing: "mode default (common):"), text)
        XCTAssertNotNil(line(containing: "mode tracking (common):"), text)
        XCTAssertEqual(line(containing: ids["source"]!), "        source \(ids["source"]!) order 3")
        XCTAssertEqual(line(containing: ids["observer"]!), "        observer \(ids["observer"]!) [entry, exit] order 2, one-shot")
        let timerLine = try XCTUnwrap(line(containing: ids["timer"]!), text)
        XCTAssertTrue(timerLine.contains("fires in 99.") || timerLine.contains("fires in 100.000 s"), timerLine)
        XCTAssertTrue(timerLine.hasSuffix(", repeats every 100.000 ms, tolerance 5.000 ms"), timerLine)
        let portLine = try XCTUnwrap(line(containing: ids["port"]!), text)
        XCTAssertTrue(portLine.contains("ipc://") && portLine.contains("name \"\(ids["portName"]!)\""), portLine)
        // An item added to .common is listed once as such, and once in each common mode.
        XCTAssertEqual(lines.filter { $0.contains(ids["common"]!) }.count, 3, text)
        XCTAssertNotNil(line(containing: "counters: 0 passes, 0 wake-ups, 0 messages handled, 0 dropped"), text)
    }

    func testTheSnapshotShowsEachItemAsItIsAndTheModesOfTheRunsInProgress() throws {
        let mode = uniqueMode("snapshot")
        let source = InputSource(order: 1) {}
        let timer = LoopTimer(after: .milliseconds(300), repeating: .seconds(2), tolerance: .milliseconds(10)) { _ in }
        let observer = LoopObserver(activities: .beforeWaiting, order: -4) { _, _ in }
        let port = try LocalPort { _ in nil }
        loop.add(source, to: mode)
        loop.add(timer, to: mode)
        loop.add(observer, to: mode)
        loop.add(port, to: mode)
        source.signal()

        let outside = loop.snapshot()
        XCTAssertEqual(outside.runningModes, [])
        XCTAssertNil(outside.currentMode)
        let contents = try XCTUnwrap(outside.contents(of: mode))
        XCTAssertFalse(contents.isCommon)
        XCTAssertEqual(contents.sources.map(\.id), [ObjectIdentifier(source)])
        XCTAssertEqual(contents.sources.first?.order, 1)
        XCTAssertEqual(contents.sources.first?.isSignalled, true)
        let timerInfo = try XCTUnwrap(contents.timers.first)
        XCTAssertEqual(timerInfo.id, ObjectIdentifier(timer))
        XCTAssertEqual(timerInfo.fireDate, timer.fireDate)
        XCTAssertEqual(timerInfo.interval, .seconds(2))
        XCTAssertEqual(timerInfo.tolerance, .milliseconds(10))
        XCTAssertTrue(timerInfo.fireDelay > .zero && timerInfo.fireDelay <= .milliseconds(300), "\(timerInfo.fireDelay)")
        XCTAssertEqual(contents.observers.map(\.activities), [.beforeWaiting])
        XCTAssertEqual(contents.observers.first?.order, -4)
        XCTAssertEqual(contents.observers.first?.repeats, true)
        XCTAssertEqual(contents.ports.map(\.id), [ObjectIdentifier(port)])
        XCTAssertEqual(contents.ports.first?.address, port.remote.address)
        XCTAssertNil(contents.ports.first?.name)
        XCTAssertEqual(contents.ports.first?.isQueuedAsReady, true, "a port is queued when added: its first pass receives")

        // Inside a run, and inside a run nested in it.
        var seen: [[LoopMode]] = []
        let inner = uniqueMode("inner")
        let innerSource = InputSource { seen.append(ThreadRunLoop.current.snapshot().runningModes) }
        loop.add(innerSource, to: inner)
        let outer = InputSource {
            seen.append(ThreadRunLoop.current.snapshot().runningModes)
            innerSource.signal()
            _ = ThreadRunLoop.current.run(mode: inner, timeout: .zero, returnAfterSourceHandled: true)
        }
        loop.add(outer, to: mode)
        outer.signal()
        _ = loop.run(mode: mode, timeout: .zero, returnAfterSourceHandled: false)
        XCTAssertEqual(seen, [[mode], [mode, inner]])
        XCTAssertEqual(loop.snapshot().contents(of: mode)?.sources.map(\.isSignalled), [false, false],
                       "performed sources are no longer signalled")
        for item in [source, innerSource, outer] { item.invalidate() }
        timer.invalidate()
        observer.invalidate()
        port.invalidate()
        XCTAssertEqual(loop.snapshot().contents(of: mode)?.isEmpty, true, "invalidated items leave the snapshot")
    }

    func testAPortIsShownQueuedAsReadyExactlyWhileTheLoopMeansToReceiveFromIt() throws {
        let mode = uniqueMode("queued")
        var received: [Int32] = []
        let port = try LocalPort { message in received.append(message.id); return nil }
        func shownQueued() -> Bool? { loop.snapshot().contents(of: mode)?.ports.first?.isQueuedAsReady }
        loop.add(port, to: mode)
        XCTAssertEqual(shownQueued(), true, "queued on add: a burst may have come before")
        XCTAssertEqual(loop.run(mode: mode, timeout: .zero, returnAfterSourceHandled: false), .timedOut)
        XCTAssertEqual(shownQueued(), false, "the pass's receive found it drained")

        TestThread { try! port.send(LoopMessage(id: 5)) }.join()
        XCTAssertEqual(shownQueued(), false, "the loop has not polled since: the snapshot does not ask the socket")
        XCTAssertEqual(received, [])

        XCTAssertEqual(loop.run(mode: mode, timeout: .seconds(20), returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(received, [5])
        XCTAssertEqual(shownQueued(), false, "asked ZMQ_EVENTS after the run's one message: nothing more waits")

        TestThread { for id: Int32 in 6...7 { try! port.send(LoopMessage(id: id)) } }.join()
        XCTAssertEqual(loop.run(mode: mode, timeout: .seconds(20), returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(shownQueued(), true, "message 7 waits: requeued")
        XCTAssertEqual(loop.run(mode: mode, timeout: .zero, returnAfterSourceHandled: false), .timedOut)
        XCTAssertEqual(shownQueued(), false, "a receive found it drained")
        XCTAssertEqual(received, [5, 6, 7])
        XCTAssertTrue(loop.description.contains("port \(LoopSnapshotFormatter.identity(ObjectIdentifier(port)))"))
        XCTAssertFalse(loop.description.contains("queued as ready"))
        port.invalidate()
    }

    func testTakingSnapshotsOfALoopWhosePortHasAMessageWaitingChangesNothingObservable() throws {
        // The same scenario twice, on fresh ports in a fresh mode: two drained ports, a
        // message sent to each, then two runs that each return after one message. Taking
        // snapshots and descriptions at every step must leave the delivery order, the
        // loop's counters and its sleep notifications exactly as they are without them.
        struct Outcome: Equatable {
            var order: [String] = []
            var activities: [LoopActivity] = []
            var passes = 0, wakeUps = 0, messagesHandled = 0
            var queuedAfterSends: [Bool] = []
        }
        func scenario(takingSnapshots: Bool) throws -> Outcome {
            let mode = uniqueMode(takingSnapshots ? "observed" : "unobserved")
            var outcome = Outcome()
            let first = try LocalPort { _ in outcome.order.append("first"); return nil }
            let second = try LocalPort { _ in outcome.order.append("second"); return nil }
            let observer = LoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, activity in
                outcome.activities.append(activity)
            }
            loop.add(first, to: mode)
            loop.add(second, to: mode)
            func queued() -> [Bool] { loop.snapshot().contents(of: mode)?.ports.map(\.isQueuedAsReady) ?? [] }
            var passes = 0
            while queued().contains(true) {
                _ = loop.run(mode: mode, timeout: .zero, returnAfterSourceHandled: false)
                passes += 1
                XCTAssertLessThan(passes, 10, "two ports drain in two passes")
            }
            loop.add(observer, to: mode)
            func look() {
                guard takingSnapshots else { return }
                for _ in 0..<3 {
                    outcome.queuedAfterSends = queued()
                    _ = loop.description
                }
            }
            TestThread {
                try! second.send(LoopMessage(id: 2))
                try! first.send(LoopMessage(id: 1))
            }.join()
            let before = loop.instruments.counters // not a snapshot: the unobserved run takes none
            look()
            XCTAssertEqual(loop.run(mode: mode, timeout: .seconds(20), returnAfterSourceHandled: true), .handledSource)
            look()
            XCTAssertEqual(loop.run(mode: mode, timeout: .seconds(20), returnAfterSourceHandled: true), .handledSource)
            let after = loop.instruments.counters
            outcome.passes = after.passes - before.passes
            outcome.wakeUps = after.wakeUps - before.wakeUps
            outcome.messagesHandled = after.messagesHandled - before.messagesHandled
            observer.invalidate()
            first.invalidate()
            second.invalidate()
            return outcome
        }

        let unobserved = try scenario(takingSnapshots: false)
        var observed = try scenario(takingSnapshots: true)
        XCTAssertEqual(Set(unobserved.order), ["first", "second"])
        XCTAssertEqual(unobserved.messagesHandled, 2)
        XCTAssertEqual(unobserved.wakeUps, 1, "one sleep, woken by both descriptors; the second message needs no wake-up")
        XCTAssertEqual(unobserved.activities, [.beforeWaiting, .afterWaiting])
        XCTAssertEqual(observed.queuedAfterSends, observed.order.first == "first" ? [false, true] : [true, false],
                       "after the first run the port its poll reported is queued; the one delivered, asked, is not")
        observed.queuedAfterSends = []
        XCTAssertEqual(observed, unobserved)
    }

    func testFromAnotherThreadTheDescriptionIsASummaryAndTheSnapshotIsTakenThroughPerformAndWait() throws {
        let timer = LockedValue<LoopTimer?>(nil)
        let server = LoopThread { loop in
            let created = LoopTimer(after: .seconds(100)) { _ in }
            loop.add(created, to: .default)
            timer.withLock { $0 = created }
        }
        let summary = server.loop.description
        XCTAssertTrue(summary.hasPrefix("ThreadRunLoop(thread, waiting: "), summary)
        XCTAssertFalse(summary.contains("\n"), "no items are read from another thread")
        let loop = server.loop
        let snapshot = try loop.performAndWait { loop.snapshot() }
        XCTAssertEqual(snapshot.currentMode, .default, "taken during the loop's own run")
        let timerID = ObjectIdentifier(timer.withLock { $0! })
        XCTAssertEqual(snapshot.contents(of: .default)?.timers.map(\.id), [timerID])
        XCTAssertEqual(snapshot.contents(of: .default)?.sources.count, 1, "the thread's keep-alive source")
        server.stop()
    }
}
