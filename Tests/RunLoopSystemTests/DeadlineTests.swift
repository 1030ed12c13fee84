@testable import RunLoopSystem
import XCTest

final class DeadlineTests: XCTestCase {
    func testNowNeverGoesBackwards() {
        var previous = Deadline.now()
        for _ in 0..<1_000 {
            let next = Deadline.now()
            XCTAssertGreaterThanOrEqual(next, previous)
            previous = next
        }
    }

    func testAddingSaturatesAtBothEnds() {
        XCTAssertEqual(Deadline.distantFuture + .seconds(1), .distantFuture)
        XCTAssertEqual(Deadline(rawValue: 5) + .nanoseconds(-10), Deadline(rawValue: 0))
        XCTAssertEqual(Deadline(rawValue: 5) + .nanoseconds(10), Deadline(rawValue: 15))
    }

    func testADurationInNanosecondsTruncatesTowardZeroAndSaturates() {
        XCTAssertEqual(Duration.seconds(3).totalNanoseconds, 3_000_000_000)
        XCTAssertEqual(Duration.milliseconds(-1500).totalNanoseconds, -1_500_000_000)
        XCTAssertEqual(Duration(secondsComponent: 0, attosecondsComponent: 1_999_999_999).totalNanoseconds, 1)
        XCTAssertEqual(Duration(secondsComponent: 0, attosecondsComponent: -1_999_999_999).totalNanoseconds, -1)
        XCTAssertEqual(Duration.seconds(Int64.max).totalNanoseconds, .max)
        XCTAssertEqual(Duration.seconds(Int64.min).totalNanoseconds, .min)
        XCTAssertEqual(Deadline(rawValue: UInt64(Int64.max) + 2) + .seconds(Int64.max), .distantFuture)
    }

    func testSubtractingGivesASignedDuration() {
        XCTAssertEqual(Deadline(rawValue: 30) - Deadline(rawValue: 10), .nanoseconds(20))
        XCTAssertEqual(Deadline(rawValue: 10) - Deadline(rawValue: 30), .nanoseconds(-20))
    }
}
