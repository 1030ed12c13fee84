/// `--repeat N`: the outcomes of N runs of the same cases folded into one outcome per case,
/// whose figures are the medians over the runs and whose `repeated` fields hold the
/// spreads (min–max). A ratio's median is the median of the runs' own ratios, each
/// RunLoopKit's figure ÷ the peer's from the same run.
enum Repeats {
    /// Folds `runs` (each the outcomes of one run, the same cases in the same order). The
    /// chart keeps the last run's distributions; notes and set-up facts are the first run's.
    static func combine(_ runs: [[CaseOutcome]]) -> [CaseOutcome] {
        guard let first = runs.first else { return [] }
        guard runs.count > 1 else { return first }
        return first.map { template in
            let outcomes = runs.compactMap { run in run.first { $0.name == template.name } }
            var combined = template
            combined.metrics = template.metrics.map { metric in
                let samples = outcomes.compactMap { outcome in outcome.metrics.first { $0.metric == metric.metric } }
                return fold(metric, samples, runs: runs.count)
            }
            combined.distributions = outcomes.last?.distributions ?? template.distributions
            combined.seconds = outcomes.reduce(0) { $0 + $1.seconds }
            return combined
        }
    }

    /// One metric over the runs: the medians as its figures, the spreads beside them.
    private static func fold(_ metric: MetricResult, _ samples: [MetricResult], runs: Int) -> MetricResult {
        let runloopkit = Spread(samples.map(\.runloopkit))
        var peers: [String: Spread] = [:]
        var ratios: [String: Spread] = [:]
        for peer in metric.peers {
            peers[peer.name] = Spread(samples.map { $0.value(of: peer.name) ?? .nan })
            ratios[peer.name] = Spread(samples.map { sample in
                guard let other = sample.value(of: peer.name), other != 0 else { return .nan }
                return sample.runloopkit / other
            })
        }
        var folded = MetricResult(caseName: metric.caseName, metric: metric.metric, unit: metric.unit,
                                  lowerIsBetter: metric.lowerIsBetter, runloopkit: runloopkit?.median ?? .nan,
                                  peers: metric.peers.map { PeerValue(name: $0.name, value: peers[$0.name]?.median ?? .nan) },
                                  targets: metric.targets)
        folded.repeated = RepeatedFigures(runs: runs, runloopkit: runloopkit, peers: peers, ratios: ratios)
        return folded
    }
}
