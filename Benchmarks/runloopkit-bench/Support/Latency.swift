import LatencyStatistics

/// A latency distribution in microseconds, as the table, the JSON and the chart use it.
struct LatencySummary: Sendable {
    let count: UInt64
    let p50: Double
    let p90: Double
    let p99: Double
    let p999: Double
    let max: Double

    /// Nothing measured (a contender left out with `--only`): every figure is NaN.
    static let empty = LatencySummary(count: 0, p50: .nan, p90: .nan, p99: .nan, p999: .nan, max: .nan)

    /// The chart's points: p50, p90, p99, p99.9.
    var chartPoints: [(label: String, value: Double)] {
        [("p50", p50), ("p90", p90), ("p99", p99), ("p99.9", p999)]
    }

    var brief: String { "p50 \(Format.micro(p50)) µs, p99 \(Format.micro(p99)) µs" }
}

extension LatencySummary {
    /// The distribution `histogram` recorded, in microseconds; `.empty` when it recorded nothing.
    init(_ histogram: LatencyHistogram) {
        guard let ns = histogram.percentiles else {
            self = .empty
            return
        }
        func us(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1000 }
        self.init(count: histogram.count, p50: us(ns.p50), p90: us(ns.p90), p99: us(ns.p99), p999: us(ns.p999),
                  max: us(ns.max))
    }
}
