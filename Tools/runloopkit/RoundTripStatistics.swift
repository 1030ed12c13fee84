import Histogram

/// Round-trip times, kept in an HdrHistogram (nanoseconds, three significant digits), and
/// their percentiles.
struct RoundTripStatistics {
    private var histogram = Histogram<UInt64>(highestTrackableValue: 3_600_000_000_000, numberOfSignificantValueDigits: .three)

    mutating func record(nanoseconds: Double) {
        _ = histogram.record(UInt64(max(1, nanoseconds.rounded())))
    }

    var count: UInt64 { histogram.totalCount }

    /// The summary in microseconds (one decimal), or nil when nothing was recorded.
    var summary: Summary? {
        guard count > 0 else { return nil }
        func us(_ value: UInt64) -> Double { ToolFormat.microsecondsValue(Double(value)) }
        return Summary(min: us(histogram.min), p50: us(histogram.valueAtPercentile(50)),
                       p90: us(histogram.valueAtPercentile(90)), p99: us(histogram.valueAtPercentile(99)),
                       p999: us(histogram.valueAtPercentile(99.9)), max: us(histogram.max),
                       mean: ToolFormat.microsecondsValue(histogram.mean))
    }

    /// Percentiles of the round trip, in microseconds.
    struct Summary: Encodable {
        let min: Double
        let p50: Double
        let p90: Double
        let p99: Double
        let p999: Double
        let max: Double
        let mean: Double

        var text: String {
            "min \(min), p50 \(p50), p90 \(p90), p99 \(p99), p99.9 \(p999), max \(max), mean \(mean)"
        }
    }
}
