@testable import RunLoopKitBench
import XCTest

/// `--repeat`: figures folded into medians and spreads, ratios taken run by run.
final class RepeatsTests: XCTestCase {
    private func run(_ runloopkit: Double, _ peer: Double) -> [CaseOutcome] {
        [CaseOutcome(metric: MetricResult(caseName: "case", metric: "m", unit: "msg/s", lowerIsBetter: false,
                                          runloopkit: runloopkit, peers: [PeerValue(name: "peer", value: peer)]))]
    }

    func testFiguresAreMediansAndRatiosAreTheMedianOfEachRunsRatio() throws {
        let metric = Repeats.combine([run(1, 4), run(3, 2), run(2, 1)])[0].metrics[0]
        XCTAssertEqual(metric.runloopkit, 2)
        XCTAssertEqual(metric.value(of: "peer"), 2)
        let repeated = try XCTUnwrap(metric.repeated)
        XCTAssertEqual(repeated.runs, 3)
        // Ratios 0.25, 1.5, 2: their median, not 2 ÷ 2.
        XCTAssertEqual(repeated.ratios["peer"]?.median, 1.5)
        XCTAssertEqual(repeated.ratios["peer"]?.min, 0.25)
        XCTAssertEqual(repeated.ratios["peer"]?.max, 2)
        XCTAssertEqual(metric.ratio(to: "peer"), 1.5)
    }

    func testASingleRunIsLeftAsItIs() {
        let metric = Repeats.combine([run(1, 4)])[0].metrics[0]
        XCTAssertNil(metric.repeated)
        XCTAssertEqual(metric.ratio(to: "peer"), 0.25)
    }

    func testAFailedRunIsLeftOutOfTheSpread() {
        let metric = Repeats.combine([run(1, 4), run(.nan, 2), run(2, 4)])[0].metrics[0]
        XCTAssertEqual(metric.repeated?.runloopkit?.min, 1)
        XCTAssertEqual(metric.repeated?.runloopkit?.max, 2)
    }
}
