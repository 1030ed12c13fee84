@testable import RunLoopKitBench
import XCTest

/// A target's verdict: met by a single run's figure, or with `--repeat` only when every run
/// meets it (a spread that crosses the target is not met).
final class TargetTests: XCTestCase {
    private let atMost = Target.atMostTimes(1.15, peer: "floor")
    private let atLeast = Target.atLeastTimes(0.7, peer: "zmq-inproc")

    /// A metric of one run: RunLoopKit's figure beside the peer's.
    private func single(_ runloopkit: Double, _ peer: String, _ value: Double, _ target: Target) -> MetricResult {
        MetricResult(caseName: "case", metric: "m", unit: "µs", lowerIsBetter: true, runloopkit: runloopkit,
                     peers: [PeerValue(name: peer, value: value)], targets: [target])
    }

    /// The metric `Repeats` folds from runs whose figures are `runloopkit` and `peer`, run by run.
    private func repeated(_ runloopkit: [Double], _ peer: String, _ values: [Double], _ target: Target) -> MetricResult {
        let runs = zip(runloopkit, values).map { [CaseOutcome(metric: single($0, peer, $1, target))] }
        return Repeats.combine(runs)[0].metrics[0]
    }

    func testASingleRunMeetsARatioTargetByItsRatio() {
        XCTAssertEqual(atMost.verdict(for: single(11.4, "floor", 10, atMost)), .met)
        XCTAssertEqual(atMost.verdict(for: single(11.6, "floor", 10, atMost)), .missed)
        XCTAssertEqual(atLeast.verdict(for: single(7.1, "zmq-inproc", 10, atLeast)), .met)
        XCTAssertEqual(atLeast.verdict(for: single(6.9, "zmq-inproc", 10, atLeast)), .missed)
    }

    func testRepeatedRunsMeetATargetOnlyWhenEveryRunMeetsIt() {
        // Ratios 1.10, 1.12, 1.14: all within 1.15.
        XCTAssertEqual(atMost.verdict(for: repeated([11, 11.2, 11.4], "floor", [10, 10, 10], atMost)), .met)
        // Ratios 1.10, 1.12, 1.20: the median meets 1.15, the worst run does not.
        XCTAssertEqual(atMost.verdict(for: repeated([11, 11.2, 12], "floor", [10, 10, 10], atMost)), .spreadCrosses)
        // Ratios 1.10, 1.17, 1.20: the median misses.
        XCTAssertEqual(atMost.verdict(for: repeated([11, 11.7, 12], "floor", [10, 10, 10], atMost)), .missed)
    }

    func testAHigherIsBetterTargetIsJudgedOnItsLowestRun() {
        // Ratios 0.72, 0.75, 0.80: met.
        XCTAssertEqual(atLeast.verdict(for: repeated([7.2, 7.5, 8], "zmq-inproc", [10, 10, 10], atLeast)), .met)
        // Ratios 0.69, 0.75, 0.80: the median meets 0.7, the lowest run does not.
        XCTAssertEqual(atLeast.verdict(for: repeated([6.9, 7.5, 8], "zmq-inproc", [10, 10, 10], atLeast)), .spreadCrosses)
        // A run the host slowed for RunLoopKit alone is one run, not the verdict's median.
        XCTAssertEqual(atLeast.verdict(for: repeated([2, 7.5, 8], "zmq-inproc", [10, 10, 10], atLeast)), .spreadCrosses)
    }

    func testTheRatioIsTakenRunByRunNotFromTheMedians() {
        // Each run's ratio is 1.10 although the peer's figure moved fourfold between runs.
        XCTAssertEqual(atMost.verdict(for: repeated([11, 44, 22], "floor", [10, 40, 20], atMost)), .met)
    }

    func testAnAbsoluteTargetIsJudgedOnRunLoopKitsOwnSpread() {
        let limit = Target.atMost(5)
        let metric = { (figures: [Double]) -> MetricResult in
            let runs = figures.map { [CaseOutcome(metric: MetricResult(caseName: "case", metric: "cpu_ms", unit: "ms",
                                                                      lowerIsBetter: true, runloopkit: $0, targets: [limit]))] }
            return Repeats.combine(runs)[0].metrics[0]
        }
        XCTAssertEqual(limit.verdict(for: metric([1, 2, 4.9])), .met)
        XCTAssertEqual(limit.verdict(for: metric([1, 2, 6])), .spreadCrosses)
        XCTAssertEqual(limit.verdict(for: metric([1, 6, 7])), .missed)
    }

    func testAMissByLessThanTheTablesRoundingShowsTheWorstRunInFull() throws {
        // Ratios 0.5994, 0.63, 0.64 against ≥ 0.60: the table rounds the worst to 0.60.
        let target = Target.atLeastTimes(0.6, peer: "plain")
        let outcome = CaseOutcome(metric: repeated([5.994, 6.3, 6.4], "plain", [10, 10, 10], target))
        let line = try XCTUnwrap(Table.tally([outcome]).missed.first)
        XCTAssertTrue(line.contains("runs 0.60–0.64"), line)
        XCTAssertTrue(line.hasSuffix("(worst 0.5994)"), line)
    }

    func testAMissingFigureHasNoVerdict() {
        XCTAssertNil(atMost.verdict(for: single(.nan, "floor", 10, atMost)))
        XCTAssertNil(atMost.verdict(for: single(11, "floor", .nan, atMost)))
        XCTAssertNil(atMost.verdict(for: single(11, "other", 10, atMost)))
    }

    func testTheSummaryCountsACrossingSpreadAsMissedAndSaysWhy() throws {
        let outcome = CaseOutcome(metric: repeated([11, 11.2, 12], "floor", [10, 10, 10], atMost))
        let tally = Table.tally([outcome])
        XCTAssertEqual(tally.met, 0)
        XCTAssertEqual(tally.total, 1)
        let line = try XCTUnwrap(tally.missed.first)
        XCTAssertEqual(tally.missed.count, 1)
        XCTAssertTrue(line.contains("runs 1.10–1.20"), line)
        XCTAssertTrue(line.hasSuffix("the median meets it, not every run (worst 1.2)"), line)
        XCTAssertTrue(Table.rows([outcome]).contains { $0.cells.last == "NO (spread)" })
    }
}

extension CaseOutcome {
    /// An outcome of one metric, named after its case.
    init(metric: MetricResult) {
        self.init(name: metric.caseName)
        metrics = [metric]
    }
}
