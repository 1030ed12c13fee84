@testable import RunLoopKit
import XCTest

/// A requester's routing id, kept for the reply: inline up to 16 bytes, on the heap beyond.
final class RoutingIDTests: XCTestCase {
    private func bytes(of id: RoutingID) -> [UInt8] { id.withUnsafeBytes { [UInt8]($0) } }
    private func routingID(_ bytes: [UInt8]) -> RoutingID { bytes.withUnsafeBytes { RoutingID($0) } }

    func testIdsOfEveryLengthALibzmqPeerCanHaveComeBackByteForByte() {
        // libzmq's own ids are 5 bytes (a zero and a 32-bit counter); a peer may choose 1 to 255.
        for length in [0, 1, 5, 15, 16, 17, 64, 255] {
            let original = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let id = routingID(original)
            XCTAssertEqual(id.count, length)
            XCTAssertEqual(bytes(of: id), original, "\(length) bytes")
        }
    }

    func testIdsAreEqualExactlyWhenTheirBytesAre() {
        XCTAssertEqual(routingID([0, 0, 0, 0, 1]), routingID([0, 0, 0, 0, 1]))
        XCTAssertNotEqual(routingID([0, 0, 0, 0, 1]), routingID([0, 0, 0, 0, 2]))
        XCTAssertNotEqual(routingID([0, 0, 0, 0]), routingID([0, 0, 0, 0, 0]), "a shorter id padded with zeros is another id")
        let long = [UInt8](repeating: 9, count: 40)
        XCTAssertEqual(routingID(long), routingID(long))
        XCTAssertNotEqual(routingID(long), routingID(long.dropLast() + [8]))
    }

    func testEqualIdsHashAlikeSoATableFindsARequestByItsConnection() {
        for length in [1, 5, 16, 17, 255] {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 7) }
            XCTAssertEqual(routingID(bytes).hashValue, routingID(bytes).hashValue, "\(length) bytes")
            var table: [RoutingID: Int] = [routingID(bytes): length]
            table[routingID(bytes.dropLast() + [0xFF])] = -1
            XCTAssertEqual(table[routingID(bytes)], length)
        }
    }
}
