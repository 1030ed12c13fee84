import RunLoopSystem

/// A run loop's counters and metrics, bumped from the pass. Loop thread only.
///
/// The counters are plain integers. The metrics exist only if a backend was bootstrapped
/// before the loop was created (see `LoopMetrics`); only then does a pass read the clock,
/// twice per pass and twice per sleep, to report its working time.
struct LoopInstruments {
    private(set) var passes = 0
    private(set) var wakeUps = 0
    private(set) var messagesHandled = 0
    /// Starts as the shared zeros: the first drop copies them, so a loop that drops nothing
    /// (every worker's, say) allocates no array of its own.
    private var drops = LoopInstruments.noDrops
    private static let noDrops = [Int](repeating: 0, count: MessageDropReason.allCases.count)
    /// Nanoseconds spent asleep over the loop's life; measured only with metrics.
    private var asleep: UInt64 = 0
    let metrics: LoopMetrics?

    init(metrics: LoopMetrics? = LoopMetrics.make()) {
        self.metrics = metrics
    }

    /// When a pass began, and how long the loop had slept by then (zero without metrics).
    struct PassStart {
        let time: UInt64
        let asleep: UInt64
    }

    @inline(__always)
    mutating func passBegins() -> PassStart {
        passes += 1
        guard let metrics else { return PassStart(time: 0, asleep: 0) }
        metrics.passes.increment()
        return PassStart(time: Deadline.now().rawValue, asleep: asleep)
    }

    /// Reports the pass's working time: its duration less the sleeps within it (nested
    /// runs' passes included, so a handler that runs the loop is charged its work only).
    @inline(__always)
    func passEnds(_ start: PassStart) {
        guard let metrics, start.time != 0 else { return }
        let elapsed = Deadline.now().rawValue &- start.time
        let slept = asleep &- start.asleep
        metrics.passDuration.recordNanoseconds(Int64(clamping: elapsed > slept ? elapsed - slept : 0))
    }

    /// Called before the poll-set wait; returns when it began (zero without metrics).
    @inline(__always)
    func sleepBegins() -> UInt64 {
        metrics == nil ? 0 : Deadline.now().rawValue
    }

    /// Called after the poll-set wait; `slept` is false when the pass only looked.
    @inline(__always)
    mutating func sleepEnds(since start: UInt64, slept: Bool) {
        if slept { wakeUps += 1 }
        guard let metrics else { return }
        if slept { metrics.wakeUps.increment() }
        if start != 0 { asleep &+= Deadline.now().rawValue &- start }
    }

    @inline(__always)
    mutating func messageHandled() {
        messagesHandled += 1
        metrics?.messagesHandled.increment()
    }

    mutating func messageDropped(_ reason: MessageDropReason) {
        drops[reason.index] += 1
        metrics?.messagesDropped[reason.index].increment()
    }

    var counters: LoopCounters {
        LoopCounters(passes: passes, wakeUps: wakeUps, messagesHandled: messagesHandled,
                     messagesDropped: Dictionary(uniqueKeysWithValues: MessageDropReason.allCases.map { ($0, drops[$0.index]) }))
    }
}
