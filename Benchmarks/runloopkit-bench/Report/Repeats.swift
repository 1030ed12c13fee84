/// The targets over several runs of the same cases in one invocation (`--repeat N`): for
/// each target, the figure it compares (a ratio to its peer, or RunLoopKit's own value)
/// in every run, their median and spread. A target is met when the median meets it: a
/// single run's ratio moves by a third on a shared 2-vCPU machine.
enum Repeats {
    struct Row {
        let caseName: String
        let metric: String
        let target: Target
        let unit: String
        /// One figure per run that had it: the ratio for a ratio target, else the value.
        let figures: [Double]

        var median: Double {
            let sorted = figures.sorted()
            guard !sorted.isEmpty else { return .nan }
            let middle = sorted.count / 2
            return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
        }

        var isMet: Bool? {
            let median = median
            guard !median.isNaN else { return nil }
            switch target {
            case .atMostTimes(let factor, _): return median <= factor
            case .atLeastTimes(let factor, _): return median >= factor
            case .atMost(let limit): return median <= limit
            }
        }
    }

    /// The rows of every target of `runs` (each run: the outcomes of the selected cases).
    static func rows(_ runs: [[CaseOutcome]]) -> [Row] {
        guard let first = runs.first else { return [] }
        var rows: [Row] = []
        for (caseIndex, outcome) in first.enumerated() {
            for (metricIndex, metric) in outcome.metrics.enumerated() {
                for target in metric.targets {
                    let figures = runs.compactMap { run -> Double? in
                        guard caseIndex < run.count, metricIndex < run[caseIndex].metrics.count else { return nil }
                        let result = run[caseIndex].metrics[metricIndex]
                        let figure = target.peer.map { result.ratio(to: $0) } ?? result.runloopkit
                        return figure.flatMap { $0.isNaN ? nil : $0 }
                    }
                    rows.append(Row(caseName: outcome.name, metric: metric.metric, target: target,
                                    unit: metric.unit, figures: figures))
                }
            }
        }
        return rows
    }

    /// The table printed after the runs.
    static func text(_ runs: [[CaseOutcome]]) -> String {
        let rows = rows(runs)
        var lines = ["", "Over \(runs.count) runs: each target's figure (ratio to its peer, or value), median [min–max]; met when the median is."]
        for row in rows {
            let figures = row.figures.sorted()
            let spread = figures.isEmpty ? "—" : "\(Format.ratio(figures.first!))–\(Format.ratio(figures.last!))"
            let verdict = row.isMet.map { $0 ? "met" : "MISSED" } ?? "n/a"
            lines.append("\(row.caseName.padding(toLength: 24, withPad: " ", startingAt: 0)) "
                         + "\(row.metric.padding(toLength: 12, withPad: " ", startingAt: 0)) "
                         + "\(row.target.description(unit: row.unit).padding(toLength: 28, withPad: " ", startingAt: 0)) "
                         + "median \(Format.ratio(row.median)) [\(spread)]  \(verdict)")
        }
        let met = rows.filter { $0.isMet == true }.count
        lines.append("Targets met (median of \(runs.count)): \(met) of \(rows.count).")
        return lines.joined(separator: "\n")
    }
}
