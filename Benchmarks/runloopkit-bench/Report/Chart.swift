import Foundation

/// The latency chart: one panel per latency case, the percentiles p50 to p99.9 across and
/// microseconds up (log scale), RunLoopKit's line beside each peer's. Plain SVG text.
enum Chart {
    static let panelWidth = 470.0
    static let panelHeight = 330.0
    static let columns = 2
    static let plot = (left: 62.0, right: 18.0, top: 78.0, bottom: 40.0)
    static let palette = ["#1f6fb4", "#e07b00", "#6a9f2a", "#8e5ba8", "#8c6d31"]
    static let runLoopKitColor = "#c8102e"
    /// The height of the title block above the panels.
    static let header = 66.0

    static func svg(_ outcomes: [CaseOutcome], run: BenchRun) -> String {
        // Contenders left out with `--only` have nothing to draw.
        let panels = outcomes.map { outcome in
            var shown = outcome
            shown.distributions = outcome.distributions.filter { $0.summary.count > 0 }
            return shown
        }.filter { !$0.distributions.isEmpty }
        let rows = max(1, (panels.count + columns - 1) / columns)
        let width = panelWidth * Double(columns)
        let height = panelHeight * Double(rows) + header
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" \
            viewBox="0 0 \(Int(width)) \(Int(height))" font-family="Helvetica, Arial, sans-serif">
            <rect width="100%" height="100%" fill="#ffffff"/>
            <text x="16" y="26" font-size="17" font-weight="bold">RunLoopKit latency beside its peers (µs, log scale; lower is better)</text>
            <text x="16" y="44" font-size="12" fill="#555">runloopkit-bench \(escape(run.caption))</text>
            <text x="16" y="60" font-size="12" fill="#555">HdrHistogram percentiles p50, p90, p99 and p99.9 of each implementation; RunLoopKit is the thick red line, its values printed</text>

            """
        for (index, outcome) in panels.enumerated() {
            let x = Double(index % columns) * panelWidth
            let y = header + Double(index / columns) * panelHeight
            svg += panel(outcome, x: x, y: y)
        }
        if panels.isEmpty {
            svg += "<text x=\"16\" y=\"80\" font-size=\"13\">No latency case was run.</text>\n"
        }
        return svg + "</svg>\n"
    }

    private static func panel(_ outcome: CaseOutcome, x: Double, y: Double) -> String {
        let left = x + plot.left
        let right = x + panelWidth - plot.right
        let top = y + plot.top
        let bottom = y + panelHeight - plot.bottom
        let values = outcome.distributions.flatMap { $0.summary.chartPoints.map(\.value) }.filter { $0 > 0 }
        let low = floor(log10(max(values.min() ?? 1, 0.01)))
        let high = max(low + 1, ceil(log10(max(values.max() ?? 10, 0.01))))
        func yPosition(_ value: Double) -> Double {
            let clamped = max(value, pow(10, low))
            return bottom - (log10(clamped) - low) / (high - low) * (bottom - top)
        }
        let labels = ["p50", "p90", "p99", "p99.9"]
        func xPosition(_ index: Int) -> Double {
            left + 20 + Double(index) * (right - left - 40) / Double(labels.count - 1)
        }
        var svg = "<g>\n"
        svg += "<text x=\"\(x + 16)\" y=\"\(y + 22)\" font-size=\"14\" font-weight=\"bold\">\(escape(outcome.name))</text>\n"
        svg += "<text x=\"\(x + 16)\" y=\"\(y + 38)\" font-size=\"11\" fill=\"#555\">\(escape(outcome.chartCaption))</text>\n"
        // Legend, RunLoopKit first.
        var legendX = x + 16
        for (index, distribution) in outcome.distributions.enumerated() {
            let color = self.color(index)
            svg += "<rect x=\"\(legendX)\" y=\"\(y + 48)\" width=\"12\" height=\"4\" fill=\"\(color)\"/>\n"
            svg += "<text x=\"\(legendX + 16)\" y=\"\(y + 54)\" font-size=\"11\"\(index == 0 ? " font-weight=\"bold\"" : "")>\(escape(distribution.name))</text>\n"
            legendX += 28 + Double(distribution.name.count) * 6.2
        }
        // Grid: decades and their 2× and 5×.
        svg += "<rect x=\"\(left)\" y=\"\(top)\" width=\"\(right - left)\" height=\"\(bottom - top)\" fill=\"none\" stroke=\"#999\"/>\n"
        var decade = low
        while decade <= high {
            for step in [1.0, 2.0, 5.0] {
                let value = pow(10, decade) * step
                guard log10(value) <= high + 1e-9 else { continue }
                let lineY = format(yPosition(value))
                let major = step == 1
                svg += "<line x1=\"\(left)\" y1=\"\(lineY)\" x2=\"\(right)\" y2=\"\(lineY)\" stroke=\"\(major ? "#ccc" : "#eee")\"/>\n"
                svg += "<text x=\"\(left - 6)\" y=\"\(format(yPosition(value) + 4))\" font-size=\"10\" text-anchor=\"end\" fill=\"#444\">\(axisLabel(value))</text>\n"
            }
            decade += 1
        }
        for (index, label) in labels.enumerated() {
            svg += "<text x=\"\(format(xPosition(index)))\" y=\"\(bottom + 16)\" font-size=\"11\" text-anchor=\"middle\">\(label)</text>\n"
        }
        svg += "<text x=\"\(x + 14)\" y=\"\((top + bottom) / 2)\" font-size=\"11\" transform=\"rotate(-90 \(x + 14) \((top + bottom) / 2))\" text-anchor=\"middle\">µs</text>\n"
        // Peers first, so RunLoopKit's line is drawn on top.
        for (index, distribution) in outcome.distributions.enumerated().reversed() {
            let color = self.color(index)
            let points = distribution.summary.chartPoints
            let path = points.enumerated().map { "\(format(xPosition($0.offset))),\(format(yPosition($0.element.value)))" }
            let strokeWidth = index == 0 ? 3 : 1.6
            svg += "<polyline points=\"\(path.joined(separator: " "))\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"\(strokeWidth)\"/>\n"
            for (pointIndex, point) in points.enumerated() {
                let cx = format(xPosition(pointIndex))
                let cy = format(yPosition(point.value))
                svg += "<circle cx=\"\(cx)\" cy=\"\(cy)\" r=\"\(index == 0 ? 4 : 3)\" fill=\"\(color)\">"
                svg += "<title>\(escape(distribution.name)) \(point.label): \(Format.value(point.value)) µs</title></circle>\n"
                if index == 0 {
                    svg += "<text x=\"\(cx)\" y=\"\(format(yPosition(point.value) - 8))\" font-size=\"10\" text-anchor=\"middle\" fill=\"\(color)\">\(Format.value(point.value))</text>\n"
                }
            }
        }
        return svg + "</g>\n"
    }

    private static func color(_ index: Int) -> String {
        index == 0 ? runLoopKitColor : palette[(index - 1) % palette.count]
    }

    private static func axisLabel(_ value: Double) -> String {
        value >= 1000 ? "\(Int(value / 1000))k" : value >= 1 ? "\(Int(value))" : Format.value(value)
    }

    private static func format(_ value: Double) -> String { String(format: "%.1f", value) }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
