@testable import RunLoopKit
import XCTest

/// A message's accessors: its data and port components in order, its first data
/// component, and its text.
final class LoopMessageTests: XCTestCase {
    private let first = RemotePort(PortAddress(unchecked: "inproc://runloopkit-tests.message.first"))
    private let second = RemotePort(PortAddress(unchecked: "inproc://runloopkit-tests.message.second"))

    func testDataAndPortsKeepTheirOrderAndLeaveTheOtherKindOut() {
        let message = LoopMessage(id: 1, components: [
            .port(first), .data([1, 2]), .port(second), .data([]), .data([3]),
        ])
        XCTAssertEqual(message.data, [[1, 2], [], [3]])
        XCTAssertEqual(message.ports, [first, second])
        XCTAssertEqual(LoopMessage(id: 2).data, [])
        XCTAssertEqual(LoopMessage(id: 2).ports, [])
    }

    func testFirstDataIsTheFirstDataComponentWhereverItIsAndNilWithoutOne() {
        XCTAssertEqual(LoopMessage(id: 1, components: [.port(first), .data([1, 2]), .data([3])]).firstData, [1, 2])
        XCTAssertEqual(LoopMessage(id: 1, components: [.data([]), .data([3])]).firstData, [])
        XCTAssertNil(LoopMessage(id: 1, components: [.port(first), .port(second)]).firstData)
        XCTAssertNil(LoopMessage(id: 1).firstData)
    }

    func testTextIsTheFirstDataComponentWhereverItIsAndNilWhenNotUTF8() {
        XCTAssertEqual(LoopMessage(id: 1, text: "héllo").text, "héllo")
        XCTAssertEqual(LoopMessage(id: 1, components: [.port(first), .data(Array("after a port".utf8)),
                                                       .data(Array("second".utf8))]).text, "after a port")
        XCTAssertNil(LoopMessage(id: 1, components: [.data([0xFF, 0xFE]), .data(Array("valid".utf8))]).text,
                     "only the first data component is text")
        XCTAssertNil(LoopMessage(id: 1, components: [.port(first)]).text)
        XCTAssertEqual(LoopMessage(id: 1, components: [.data([])]).text, "")
    }
}
