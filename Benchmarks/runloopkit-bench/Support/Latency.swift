import Histogram

/// Latencies of one implementation in one case, in an HdrHistogram (nanoseconds, three
/// significant digits); percentiles come from the histogram, never from sorting samples.
struct LatencyRecorder: Sendable {
    private var histogram = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 600_000_000_000,
                                              numberOfSignificantValueDigits: .three)

    /// Records one latency in nanoseconds (zero is recorded as one nanosecond).
    @inline(__always)
    mutating func record(nanoseconds: UInt64) {
        _ = histogram.record(max(1, nanoseconds))
    }

    mutating func add(_ other: LatencyRecorder) { histogram.add(other.histogram) }

    var count: UInt64 { histogram.totalCount }

    /// The distribution in microseconds.
    var summary: LatencySummary {
        func us(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1000 }
        guard count > 0 else { return .empty }
        return LatencySummary(count: count,
                              p50: us(histogram.valueAtPercentile(50)), p90: us(histogram.valueAtPercentile(90)),
                              p99: us(histogram.valueAtPercentile(99)), p999: us(histogram.valueAtPercentile(99.9)),
                              max: us(histogram.max))
    }
}

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
