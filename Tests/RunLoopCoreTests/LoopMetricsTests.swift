import CoreMetrics
@testable import RunLoopCore
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// A loop's metrics reach whatever swift-metrics backend is bootstrapped, and cost
/// nothing without one. (A port's own metrics: `LocalPortServingTests`.)
final class LoopMetricsTests: XCTestCase {
    func testWithoutABackendALoopKeepsNoMetricsAndReadsNoClock() {
        XCTAssertNil(LoopMetrics.make(factory: NOOPMetricsHandler.instance))
        var instruments = LoopInstruments(metrics: nil)
        let pass = instruments.passBegins()
        XCTAssertEqual(pass.time, 0, "no clock read for a pass")
        XCTAssertEqual(instruments.sleepBegins(), 0, "no clock read for a sleep")
        instruments.sleepEnds(since: 0, slept: true)
        instruments.passEnds(pass)
        XCTAssertEqual(instruments.counters.passes, 1, "the counters are kept all the same")
        XCTAssertEqual(instruments.counters.wakeUps, 1)
    }

    func testALoopReportsPassesWakeUpsMessagesDropsAndPassDurationsToTheBackend() throws {
        let backend = RecordingMetricsFactory.installed
        let before = backend.reading()
        let loopCounters = LockedValue<LoopCounters?>(nil)
        TestThread { // a loop created after the backend was bootstrapped
            let loop = ThreadRunLoop.current
            var received = 0
            let port = try! FakePort { _ in received += 1 }
            loop.addItem(.port(port), binding: nil, to: .default)
            loop.add(LoopTimer(after: .milliseconds(10)) { _ in }, to: .default)
            _ = loop.run(mode: .default, until: .after(.milliseconds(20)), returnAfterSourceHandled: false)
            loop.countDroppedMessage(.malformed) // as a port reports a message it drops
            port.send(3)
            let limit = Deadline.after(.seconds(20))
            while received < 3 && Deadline.now() < limit {
                _ = loop.run(mode: .default, until: limit, returnAfterSourceHandled: true)
            }
            loopCounters.withLock { $0 = loop.counters }
            loop.removeEverywhere(.port(port))
        }.join()
        let counters = try XCTUnwrap(loopCounters.withLock { $0 })
        let after = backend.reading()
        func delta(_ key: String) -> Int64 { (after.counters[key] ?? 0) - (before.counters[key] ?? 0) }

        XCTAssertEqual(delta(LoopMetrics.passesLabel), Int64(counters.passes))
        XCTAssertGreaterThan(counters.passes, 0)
        XCTAssertEqual(delta(LoopMetrics.wakeUpsLabel), Int64(counters.wakeUps))
        XCTAssertGreaterThan(counters.wakeUps, 0)
        XCTAssertEqual(delta(LoopMetrics.messagesHandledLabel), 3)
        XCTAssertEqual(delta(LoopMetrics.messagesDroppedLabel + "|reason=malformed"), 1)
        XCTAssertEqual(delta(LoopMetrics.messagesDroppedLabel + "|reason=noHandler"), 0)
        let durations = after.timers[LoopMetrics.passDurationLabel, default: []]
            .dropFirst(before.timers[LoopMetrics.passDurationLabel, default: []].count)
        XCTAssertEqual(durations.count, counters.passes, "one duration per pass")
        XCTAssertTrue(durations.allSatisfy { $0 >= 0 })
    }

    func testTheLabelsAreValidPrometheusNames() {
        let labels = [LoopMetrics.passesLabel, LoopMetrics.wakeUpsLabel, LoopMetrics.messagesHandledLabel,
                      LoopMetrics.messagesDroppedLabel, LoopMetrics.passDurationLabel]
        for label in labels {
            XCTAssertTrue(label.utf8.allSatisfy { $0 == 0x5F || ($0 >= 0x61 && $0 <= 0x7A) }, label)
            XCTAssertTrue(label.hasPrefix("runloopkit_"), label)
        }
    }
}
