import CoreMetrics
import RunLoopSystem

/// A swift-metrics backend that remembers every value, shared by label and dimensions
/// as real backends do. Bootstrapped once per process: swift-metrics allows no more.
package final class RecordingMetricsFactory: MetricsFactory, @unchecked Sendable {
    package static let installed: RecordingMetricsFactory = {
        let factory = RecordingMetricsFactory()
        MetricsSystem.bootstrap(factory)
        return factory
    }()

    private final class CounterValue: CounterHandler, @unchecked Sendable {
        let value = LockedValue<Int64>(0)
        func increment(by amount: Int64) { value.withLock { $0 += amount } }
        func reset() { value.withLock { $0 = 0 } }
    }

    private final class Values: RecorderHandler, TimerHandler, @unchecked Sendable {
        let values = LockedValue<[Int64]>([])
        func record(_ value: Int64) { values.withLock { $0.append(value) } }
        func record(_ value: Double) { values.withLock { $0.append(Int64(value)) } }
        func recordNanoseconds(_ duration: Int64) { values.withLock { $0.append(duration) } }
    }

    private let counters = LockedValue<[String: CounterValue]>([:])
    private let series = LockedValue<[String: Values]>([:])

    /// Every counter's value and every timer's or recorder's values, by key
    /// ("label" or "label|name=value,...").
    package func reading() -> (counters: [String: Int64], timers: [String: [Int64]]) {
        (counters.withLock { $0 }.mapValues { $0.value.withLock { $0 } },
         series.withLock { $0 }.mapValues { $0.values.withLock { $0 } })
    }

    private static func key(_ label: String, _ dimensions: [(String, String)]) -> String {
        dimensions.isEmpty ? label : label + "|" + dimensions.map { "\($0.0)=\($0.1)" }.joined(separator: ",")
    }

    package func makeCounter(label: String, dimensions: [(String, String)]) -> CounterHandler {
        counters.withLock { table in
            if let existing = table[Self.key(label, dimensions)] { return existing }
            let created = CounterValue()
            table[Self.key(label, dimensions)] = created
            return created
        }
    }

    private func values(_ label: String, _ dimensions: [(String, String)]) -> Values {
        series.withLock { table in
            if let existing = table[Self.key(label, dimensions)] { return existing }
            let created = Values()
            table[Self.key(label, dimensions)] = created
            return created
        }
    }

    package func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> RecorderHandler {
        values(label, dimensions)
    }

    package func makeTimer(label: String, dimensions: [(String, String)]) -> TimerHandler { values(label, dimensions) }

    package func destroyCounter(_ handler: CounterHandler) {}
    package func destroyRecorder(_ handler: RecorderHandler) {}
    package func destroyTimer(_ handler: TimerHandler) {}
}
