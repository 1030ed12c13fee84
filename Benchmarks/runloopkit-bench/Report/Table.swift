/// The table at the end of a run: per case and metric, RunLoopKit's figure, each peer's,
/// the ratio (RunLoopKit ÷ peer) and whether the issue's target was met.
enum Table {
    struct Row {
        var cells: [String]
    }

    static let header = ["case", "metric", "RunLoopKit", "peer", "peer value", "ratio", "target", "met"]

    /// One row per peer of each metric (one row when it has no peer); a target sits on the
    /// row of the peer it names, absolute targets on the metric's first row.
    static func rows(_ outcomes: [CaseOutcome]) -> [Row] {
        var rows: [Row] = []
        for outcome in outcomes {
            for (metricIndex, metric) in outcome.metrics.enumerated() {
                let unit = metric.unit.isEmpty || metric.unit == "×" ? "" : " \(metric.unit)"
                let lines = metric.peers.isEmpty ? [nil] : metric.peers.map { Optional($0) }
                for (lineIndex, peer) in lines.enumerated() {
                    let targets = metric.targets.filter { target in
                        if let name = target.peer { return name == peer?.name }
                        return lineIndex == 0
                    }
                    let target = targets.map { $0.description(unit: metric.unit) }.joined(separator: "; ")
                    let met = targets.map { verdict($0.verdict(for: metric)) }.joined(separator: "; ")
                    let first = lineIndex == 0
                    let repeated = metric.repeated
                    rows.append(Row(cells: [
                        first && metricIndex == 0 ? outcome.name : "",
                        first ? metric.metric : "",
                        first ? Format.value(metric.runloopkit) + unit + range(repeated?.runloopkit, Format.value) : "",
                        peer?.name ?? "—",
                        peer.map { Format.value($0.value) + unit + range(repeated?.peers[$0.name], Format.value) } ?? "",
                        peer.flatMap { peer in
                            metric.ratio(to: peer.name).map { Format.ratio($0) + range(repeated?.ratios[peer.name], Format.ratio) }
                        } ?? "",
                        target.isEmpty ? "" : target,
                        met,
                    ]))
                }
            }
        }
        return rows
    }

    /// " (min–max)" of a figure repeated over runs; nothing for a single run.
    static func range(_ spread: Spread?, _ format: (Double) -> String) -> String {
        guard let spread else { return "" }
        return " (\(span(spread, format)))"
    }

    /// "min–max" of a figure repeated over runs.
    static func span(_ spread: Spread, _ format: (Double) -> String) -> String {
        "\(format(spread.min))–\(format(spread.max))"
    }

    static func verdict(_ verdict: Verdict?) -> String {
        switch verdict {
        case .met?: "yes"
        case .spreadCrosses?: "NO (spread)"
        case .missed?: "NO"
        case nil: "n/a"
        }
    }

    /// The targets met and missed ("n/a" ones, not measured in this run, are left out).
    static func tally(_ outcomes: [CaseOutcome]) -> (met: Int, total: Int, missed: [String]) {
        var met = 0
        var total = 0
        var missed: [String] = []
        for metric in outcomes.flatMap(\.metrics) {
            for (target, verdict) in metric.verdicts {
                guard let verdict else { continue }
                total += 1
                if verdict == .met { met += 1; continue }
                var line = "\(metric.caseName) \(metric.metric): \(Format.value(metric.runloopkit)) \(metric.unit), "
                    + "target \(target.description(unit: metric.unit))"
                if let peer = target.peer, let ratio = metric.ratio(to: peer) {
                    let runs = metric.repeated?.ratios[peer].map { ", runs \(span($0, Format.ratio))" } ?? ""
                    line += " (ratio \(Format.ratio(ratio))\(runs))"
                } else if let spread = metric.repeated?.runloopkit {
                    line += " (runs \(span(spread, Format.value)))"
                }
                if verdict == .spreadCrosses, let worst = target.worstRun(of: metric) {
                    // Three more digits: a run that misses by less than the table's rounding.
                    line += ": the median meets it, not every run (worst \(String(format: "%.4g", worst)))"
                }
                missed.append(line)
            }
        }
        return (met, total, missed)
    }

    static func text(_ outcomes: [CaseOutcome], run: BenchRun, totalSeconds: Double) -> String {
        let rows = rows(outcomes)
        let widths = header.indices.map { column in
            ([header[column]] + rows.map { $0.cells[column] }).map(\.count).max() ?? 0
        }
        let numeric: Set<Int> = [2, 4, 5]
        func line(_ cells: [String]) -> String {
            cells.indices.map { column in
                let cell = cells[column]
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                return numeric.contains(column) ? padding + cell : cell + padding
            }.joined(separator: "  ")
        }
        var lines = ["", "RunLoopKit benchmarks — \(run.caption), \(Format.seconds(totalSeconds)) in all", ""]
        lines.append(line(header))
        lines.append(line(widths.map { String(repeating: "-", count: $0) }))
        var previousCase = ""
        for row in rows {
            if !row.cells[0].isEmpty && !previousCase.isEmpty { lines.append("") }
            if !row.cells[0].isEmpty { previousCase = row.cells[0] }
            lines.append(line(row.cells))
        }
        lines.append("")
        lines += footer(outcomes)
        return lines.joined(separator: "\n")
    }

    static func markdown(_ outcomes: [CaseOutcome], run: BenchRun, totalSeconds: Double) -> String {
        func escape(_ cell: String) -> String { cell.replacingOccurrences(of: "|", with: "\\|") }
        var lines = ["RunLoopKit benchmarks — \(run.caption), \(Format.seconds(totalSeconds)) in all.", ""]
        lines.append("| " + header.joined(separator: " | ") + " |")
        lines.append("|" + header.indices.map { [2, 4, 5].contains($0) ? "---:" : "---" }.joined(separator: "|") + "|")
        for row in rows(outcomes) {
            var cells = row.cells.map(escape)
            if !cells[0].isEmpty { cells[0] = "`\(cells[0])`" }
            if !cells[1].isEmpty { cells[1] = "`\(cells[1])`" }
            cells[7] = cells[7].split(separator: "; ").map { $0.hasPrefix("NO") ? "**\($0)**" : String($0) }.joined(separator: "; ")
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        lines.append("")
        lines += footer(outcomes).map { $0.hasPrefix("  ") ? "-" + $0.dropFirst(1) : $0 }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func footer(_ outcomes: [CaseOutcome]) -> [String] {
        let tally = tally(outcomes)
        let runs = outcomes.lazy.flatMap(\.metrics).compactMap(\.repeated?.runs).first
        var lines = ["Targets met: \(tally.met) of \(tally.total)"
                     + (runs.map { ", each by all \($0) runs (a spread that crosses a target misses it); figures are medians (min–max)." } ?? ".")]
        if !tally.missed.isEmpty {
            lines.append("Missed:")
            lines += tally.missed.map { "  \($0)" }
        }
        let notes = outcomes.flatMap(\.notes)
        if !notes.isEmpty {
            lines.append("Notes:")
            lines += notes.map { "  \($0)" }
        }
        return lines
    }
}
