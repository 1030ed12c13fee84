import Histogram

/// Latencies in nanoseconds in an HdrHistogram (1 ns to an hour, three significant digits),
/// for the bench and the `runloopkit` tool: the one place their percentiles come from,
/// always from the histogram, never from sorting samples. Package access: the tools'
/// shared code, no part of RunLoopKit's API.
@usableFromInline
package struct LatencyHistogram: Sendable {
    @usableFromInline
    var histogram = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000_000,
                                      numberOfSignificantValueDigits: .three)

    package init() {}

    /// Records one latency in nanoseconds (zero is recorded as one nanosecond).
    @inlinable
    package mutating func record(nanoseconds: UInt64) {
        _ = histogram.record(max(1, nanoseconds))
    }

    /// Adds every latency `other` recorded.
    package mutating func add(_ other: LatencyHistogram) { histogram.add(other.histogram) }

    /// How many latencies were recorded.
    package var count: UInt64 { histogram.totalCount }

    /// The distribution in nanoseconds, or nil when nothing was recorded.
    package var percentiles: LatencyPercentiles? {
        guard count > 0 else { return nil }
        return LatencyPercentiles(min: histogram.min, p50: histogram.valueAtPercentile(50),
                                  p90: histogram.valueAtPercentile(90), p99: histogram.valueAtPercentile(99),
                                  p999: histogram.valueAtPercentile(99.9), max: histogram.max, mean: histogram.mean)
    }
}

/// A latency distribution in nanoseconds: HdrHistogram's values (each the highest value
/// its bucket stands for, exact below 2048 ns, within 0.1 % above) and the mean.
package struct LatencyPercentiles: Sendable, Equatable {
    package let min: UInt64
    package let p50: UInt64
    package let p90: UInt64
    package let p99: UInt64
    package let p999: UInt64
    package let max: UInt64
    package let mean: Double
}

/// The median of `values`: the middle one, or the mean of the two middle ones; NaN for none.
package func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/// The median of `values`, nanoseconds read by a clock, as `median(_:)` takes it. Each is
/// converted by value (`Double(_:)`): `values.map(Double.init)` would pick
/// `Double(bitPattern:)` and give denormals near zero.
package func median(nanoseconds values: [UInt64]) -> Double {
    median(values.map { Double($0) })
}
