import LatencyStatistics

/// What a case found: metrics with RunLoopKit's figure, its peers' and the targets, and
/// the latency distributions for the chart.

/// A peer's figure for one metric.
struct PeerValue: Sendable {
    let name: String
    let value: Double
}

/// A target of the issue, as a comparison of RunLoopKit's figure.
enum Target: Sendable {
    /// RunLoopKit's figure ≤ `factor` × the peer's (lower is better).
    case atMostTimes(Double, peer: String)
    /// RunLoopKit's figure ≥ `factor` × the peer's (higher is better).
    case atLeastTimes(Double, peer: String)
    /// RunLoopKit's figure ≤ `limit` (in the metric's unit).
    case atMost(Double)

    var peer: String? {
        switch self {
        case .atMostTimes(_, let peer), .atLeastTimes(_, let peer): peer
        case .atMost: nil
        }
    }

    func description(unit: String) -> String {
        switch self {
        case .atMostTimes(let factor, let peer): factor == 1 ? "≤ \(peer)" : "≤ \(Format.ratio(factor)) × \(peer)"
        case .atLeastTimes(let factor, let peer): "≥ \(Format.ratio(factor)) × \(peer)"
        case .atMost(let limit): "≤ \(Format.value(limit))\(unit.isEmpty || unit == "×" ? "" : " " + unit)"
        }
    }

    /// Whether `metric` meets the target; nil when the figure it needs is missing. With
    /// `--repeat`, judged on the runs' spread (a ratio's, RunLoopKit's own figure's for an
    /// absolute target): met when every run meets it, `.spreadCrosses` when the median
    /// does and some run does not, which is not met either.
    func verdict(for metric: MetricResult) -> Verdict? {
        guard !metric.runloopkit.isNaN else { return nil }
        if metric.repeated != nil {
            guard let spread = runs(of: metric) else { return nil }
            return verdict(median: spread.median, worst: worst(of: spread))
        }
        guard let peer else { return meets(metric.runloopkit) ? .met : .missed }
        guard let ratio = metric.ratio(to: peer), !ratio.isNaN else { return nil }
        return meets(ratio) ? .met : .missed
    }

    /// With `--repeat`: the figure of the run that did worst against this target.
    func worstRun(of metric: MetricResult) -> Double? {
        runs(of: metric).map(worst)
    }

    /// With `--repeat`: the spread the target is judged on, the ratio's to its peer or,
    /// for an absolute target, RunLoopKit's own figure's.
    private func runs(of metric: MetricResult) -> Spread? {
        guard let repeated = metric.repeated else { return nil }
        guard let peer else { return repeated.runloopkit }
        return repeated.ratios[peer]
    }

    /// The highest figure of `spread` where lower is better, else the lowest.
    private func worst(of spread: Spread) -> Double {
        if case .atLeastTimes = self { spread.min } else { spread.max }
    }

    /// The verdict on a figure whose median is `median` and whose worst run gave `worst`.
    func verdict(median: Double, worst: Double) -> Verdict {
        guard meets(median) else { return .missed }
        return meets(worst) ? .met : .spreadCrosses
    }

    /// Whether the target's figure (a ratio for a target that names a peer) meets it.
    private func meets(_ figure: Double) -> Bool {
        switch self {
        case .atMostTimes(let factor, _): figure <= factor
        case .atLeastTimes(let factor, _): figure >= factor
        case .atMost(let limit): figure <= limit
        }
    }
}

/// What a run (or the runs of `--repeat`) say of a target.
enum Verdict: Sendable, Equatable {
    /// Met: by the figure, or with `--repeat` by every run.
    case met
    /// With `--repeat`: the median meets the target and some run does not. Not met: a
    /// target whose spread crosses it is not met.
    case spreadCrosses
    case missed
}

/// One case and metric: a row group of the table, an entry of the JSON.
struct MetricResult: Sendable {
    let caseName: String
    /// The JSON metric name, such as `us_p50` or `msgs_per_s`.
    let metric: String
    /// The unit shown in the table (`µs`, `msg/s`, `ms`, `MB`, ``).
    let unit: String
    let lowerIsBetter: Bool
    let runloopkit: Double
    let peers: [PeerValue]
    let targets: [Target]
    /// With `--repeat N` (N > 1): the spreads over the runs, whose medians are the figures above.
    var repeated: RepeatedFigures?

    init(caseName: String, metric: String, unit: String, lowerIsBetter: Bool, runloopkit: Double,
         peers: [PeerValue] = [], targets: [Target] = []) {
        self.caseName = caseName
        self.metric = metric
        self.unit = unit
        self.lowerIsBetter = lowerIsBetter
        self.runloopkit = runloopkit
        self.peers = peers
        self.targets = targets
    }

    func value(of peer: String) -> Double? { peers.first { $0.name == peer }?.value }

    /// RunLoopKit's figure ÷ the peer's; with `--repeat`, the median of the runs' ratios.
    func ratio(to peer: String) -> Double? {
        if let repeated { return repeated.ratios[peer]?.median }
        guard let other = value(of: peer), other != 0 else { return nil }
        return runloopkit / other
    }

    /// The verdict on each target, for the summary; nil where a figure is missing.
    var verdicts: [(target: Target, verdict: Verdict?)] { targets.map { ($0, $0.verdict(for: self)) } }
}

/// The median and the extremes of one figure over the runs of `--repeat`.
struct Spread: Sendable {
    let median: Double
    let min: Double
    let max: Double

    /// The spread of the finite values among `values`; nil when there is none.
    init?(_ values: [Double]) {
        let finite = values.filter(\.isFinite)
        guard let low = finite.min(), let high = finite.max() else { return nil }
        median = LatencyStatistics.median(finite)
        min = low
        max = high
    }
}

/// One metric's figures over the N runs of `--repeat N`: RunLoopKit's, each peer's, and
/// each ratio (RunLoopKit ÷ peer, taken run by run, so that a run's noise falls on both).
struct RepeatedFigures: Sendable {
    let runs: Int
    let runloopkit: Spread?
    /// By peer name.
    let peers: [String: Spread]
    /// By peer name: the ratios of the runs, RunLoopKit ÷ that peer.
    let ratios: [String: Spread]
}

/// A latency distribution to chart: RunLoopKit's or a peer's.
struct Distribution: Sendable {
    let name: String
    let summary: LatencySummary
}

/// Everything one case produced.
struct CaseOutcome: Sendable {
    let name: String
    var metrics: [MetricResult] = []
    /// For the chart, RunLoopKit first. Empty for cases that measure no latency distribution.
    var distributions: [Distribution] = []
    /// The chart's unit caption for this case (round trip, lateness…).
    var chartCaption = ""
    /// Remarks for the table's footer (what was measured exactly, set-up facts).
    var notes: [String] = []
    var seconds = 0.0

    init(name: String) { self.name = name }

    /// A latency case's outcome: its distributions, charted under `chartCaption`.
    init(name: String, distributions: [Distribution], chartCaption: String) {
        self.name = name
        self.distributions = distributions
        self.chartCaption = chartCaption
    }
}
