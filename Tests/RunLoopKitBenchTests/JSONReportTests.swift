import Foundation
@testable import RunLoopKitBench
import XCTest

/// The `--json` file: valid JSON that other tools read, whatever the figures.
final class JSONReportTests: XCTestCase {
    func testNumbersAreWrittenAsJSONReadsThem() {
        XCTAssertEqual(JSONReport.number(2_022_020), "2022020")
        XCTAssertEqual(JSONReport.number(2_022_020.00001), "2022020") // once "2022020.", which no parser reads
        XCTAssertEqual(JSONReport.number(10.25), "10.25")
        XCTAssertEqual(JSONReport.number(0.00004), "0")
        XCTAssertEqual(JSONReport.number(-1.5), "-1.5")
        XCTAssertEqual(JSONReport.number(.nan), "null")
        XCTAssertEqual(JSONReport.number(.infinity), "null")
    }

    func testAReportOfRepeatedRunsParsesWithItsVerdicts() throws {
        let target = Target.atMostTimes(1.15, peer: "floor")
        let runs = [(11.0, 10.0), (11.2, 10.0), (12.000_01, 10.0)].map { figure, floor in
            [CaseOutcome(metric: MetricResult(caseName: "ping \"pong\"", metric: "us_p50", unit: "µs", lowerIsBetter: true,
                                              runloopkit: figure, peers: [PeerValue(name: "floor", value: floor),
                                                                          PeerValue(name: "absent", value: .nan)],
                                              targets: [target]))]
        }
        let text = JSONReport.render(Repeats.combine(runs))
        let document = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        XCTAssertEqual(document["runs"] as? Int, 3)
        let entry = try XCTUnwrap((document["cases"] as? [[String: Any]])?.first)
        XCTAssertEqual(entry["name"] as? String, "ping \"pong\"")
        XCTAssertEqual(entry["runloopkit"] as? Double, 11.2)
        XCTAssertTrue((entry["peers"] as? [String: Any])?["absent"] is NSNull)
        let ratio = try XCTUnwrap((entry["ratios"] as? [String: Any])?["floor"] as? [String: Double])
        XCTAssertEqual(ratio["max"], 1.2)
        // The median (1.12) meets 1.15, the worst run (1.20) does not: not met.
        XCTAssertEqual((entry["met"] as? [String: Bool])?["≤ 1.15 × floor"], false)
    }
}
