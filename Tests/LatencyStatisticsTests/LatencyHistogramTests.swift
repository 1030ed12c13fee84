import LatencyStatistics
import XCTest

/// The percentiles the bench and the `runloopkit` tool print, from samples whose answer is known.
final class LatencyHistogramTests: XCTestCase {
    private func histogram(_ nanoseconds: some Sequence<UInt64>) -> LatencyHistogram {
        var histogram = LatencyHistogram()
        for value in nanoseconds { histogram.record(nanoseconds: value) }
        return histogram
    }

    func testThePercentilesOfOneToAThousandNanosecondsAreTheValuesAtThoseRanks() throws {
        let percentiles = try XCTUnwrap(histogram(1...1000).percentiles)
        XCTAssertEqual([percentiles.min, percentiles.p50, percentiles.p90, percentiles.p99, percentiles.p999,
                        percentiles.max], [1, 500, 900, 990, 999, 1000])
        XCTAssertEqual(percentiles.mean, 500.5)
    }

    func testAboveTwoThousandNanosecondsAValueIsKeptToThreeSignificantDigits() throws {
        // 1,000 samples at 1 ms and 10 at 50 ms: p99 is the millisecond, p99.9 the 50 ms.
        let sample = Array(repeating: UInt64(1_000_000), count: 1000) + Array(repeating: 50_000_000, count: 10)
        let percentiles = try XCTUnwrap(histogram(sample).percentiles)
        for (value, exact) in [(percentiles.p50, 1_000_000), (percentiles.p99, 1_000_000),
                               (percentiles.p999, 50_000_000), (percentiles.max, 50_000_000)] {
            XCTAssertEqual(Double(value), Double(exact), accuracy: Double(exact) / 1000, "\(percentiles)")
        }
    }

    func testAddedHistogramsGiveThePercentilesOfAllTheirSamples() throws {
        var merged = histogram(1...500)
        merged.add(histogram(501...1000))
        XCTAssertEqual(merged.count, 1000)
        XCTAssertEqual(merged.percentiles, histogram(1...1000).percentiles)
    }

    func testZeroIsRecordedAsOneNanosecondAndNothingRecordedHasNoPercentiles() throws {
        XCTAssertNil(LatencyHistogram().percentiles)
        XCTAssertEqual(LatencyHistogram().count, 0)
        let zero = try XCTUnwrap(histogram([0]).percentiles)
        XCTAssertEqual(zero.min, 1)
        XCTAssertEqual(zero.max, 1)
    }

    func testTheMedianIsTheMiddleValueOrTheMeanOfTheTwoMiddleOnes() {
        XCTAssertEqual(median([3, 1, 2]), 2)
        XCTAssertEqual(median([4, 1, 3, 2]), 2.5)
        XCTAssertTrue(median([]).isNaN)
    }

    func testTheMedianOfClockReadingsIsTheirValueInNanoseconds() {
        XCTAssertEqual(median(nanoseconds: [50_000, 30_000, 40_000]), 40_000)
        XCTAssertEqual(median(nanoseconds: [1_000, 2_000]), 1_500)
        XCTAssertTrue(median(nanoseconds: []).isNaN)
    }
}
