import LatencyStatistics

/// The round trips' percentiles in microseconds (one decimal), as `ping` prints them.
struct RoundTripSummary: Encodable {
    let min: Double
    let p50: Double
    let p90: Double
    let p99: Double
    let p999: Double
    let max: Double
    let mean: Double

    /// The distribution `histogram` recorded, or nil when it recorded nothing.
    init?(_ histogram: LatencyHistogram) {
        guard let ns = histogram.percentiles else { return nil }
        func us(_ nanoseconds: UInt64) -> Double { ToolFormat.microsecondsValue(Double(nanoseconds)) }
        min = us(ns.min)
        p50 = us(ns.p50)
        p90 = us(ns.p90)
        p99 = us(ns.p99)
        p999 = us(ns.p999)
        max = us(ns.max)
        mean = ToolFormat.microsecondsValue(ns.mean)
    }

    var text: String {
        "min \(min), p50 \(p50), p90 \(p90), p99 \(p99), p99.9 \(p999), max \(max), mean \(mean)"
    }
}
