import CoreMetrics

/// A run loop's swift-metrics objects, made once when the loop is created and only when a
/// metrics backend is bootstrapped: without one, the loop holds `nil` and pays a nil
/// check per event, no metric object and no clock read.
///
/// The labels follow Prometheus naming, so that any backend accepts them as they are.
/// Loops of all threads report under the same labels, which backends aggregate.
/// Loop thread only (the handlers themselves are the backend's, and thread-safe).
final class LoopMetrics {
    static let passesLabel = "runloopkit_loop_passes_total"
    static let wakeUpsLabel = "runloopkit_loop_wakeups_total"
    static let messagesHandledLabel = "runloopkit_loop_messages_handled_total"
    static let messagesDroppedLabel = "runloopkit_loop_messages_dropped_total"
    static let passDurationLabel = "runloopkit_loop_pass_duration"

    let passes: Counter
    let wakeUps: Counter
    let messagesHandled: Counter
    /// One counter per `MessageDropReason`, by `index`, with the reason as a dimension.
    let messagesDropped: [Counter]
    /// The time a pass spends working: its duration less the time it slept in the poll set.
    let passDuration: CoreMetrics.Timer

    private init(factory: any MetricsFactory) {
        passes = Counter(label: LoopMetrics.passesLabel, factory: factory)
        wakeUps = Counter(label: LoopMetrics.wakeUpsLabel, factory: factory)
        messagesHandled = Counter(label: LoopMetrics.messagesHandledLabel, factory: factory)
        messagesDropped = MessageDropReason.allCases.map { reason in
            Counter(label: LoopMetrics.messagesDroppedLabel, dimensions: [("reason", reason.rawValue)], factory: factory)
        }
        passDuration = CoreMetrics.Timer(label: LoopMetrics.passDurationLabel, preferredDisplayUnit: .microseconds,
                                         factory: factory)
    }

    /// The metrics for a new loop, or nil when `factory` is swift-metrics' no-op backend
    /// (the default until `MetricsSystem.bootstrap`).
    static func make(factory: any MetricsFactory = MetricsSystem.factory) -> LoopMetrics? {
        // The no-op backend is a final class: comparing the dynamic type says the same as
        // `is` without a dynamic cast, on every loop's creation.
        if type(of: factory) == NOOPMetricsHandler.self { return nil }
        RunLoopKitLog.loop.trace("metrics backend found: the loop reports metrics")
        return LoopMetrics(factory: factory)
    }
}
