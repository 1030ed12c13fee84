@testable import RunLoopKit
import XCTest

final class ReplyAddressCacheTests: XCTestCase {
    private func port(_ cache: inout ReplyAddressCache, _ address: String, maxBytes: Int = 1024) -> RemotePort? {
        Array(address.utf8).withUnsafeBytes { cache.port(at: $0, maxBytes: maxBytes) }
    }

    func testTheSameAddressAgainGivesTheSamePort() {
        var cache = ReplyAddressCache()
        XCTAssertEqual(port(&cache, "inproc://reply-1")?.address.rawValue, "inproc://reply-1")
        XCTAssertEqual(port(&cache, "inproc://reply-1")?.address.rawValue, "inproc://reply-1")
    }

    func testAnotherAddressOfTheSameLengthIsValidatedAndReplacesTheCachedOne() {
        var cache = ReplyAddressCache()
        XCTAssertNotNil(port(&cache, "inproc://reply-1"))
        XCTAssertEqual(port(&cache, "inproc://reply-2")?.address.rawValue, "inproc://reply-2")
        XCTAssertEqual(port(&cache, "inproc://reply-1")?.address.rawValue, "inproc://reply-1")
    }

    func testAnInvalidAddressIsRejectedAfterAValidOneOfTheSameLength() {
        var cache = ReplyAddressCache()
        XCTAssertNotNil(port(&cache, "inproc://reply-1"))
        XCTAssertNil(port(&cache, "inproc://reply\u{1}1"))
        XCTAssertNil(port(&cache, "xxxxxx://reply-1"))
        XCTAssertNotNil(port(&cache, "inproc://reply-1"))
    }

    func testACachedAddressLongerThanTheLimitIsStillRejected() {
        var cache = ReplyAddressCache()
        XCTAssertNotNil(port(&cache, "inproc://reply-1"))
        XCTAssertNil(port(&cache, "inproc://reply-1", maxBytes: 8))
    }

    func testAnEmptyFrameIsNoAddress() {
        var cache = ReplyAddressCache()
        XCTAssertNil(port(&cache, ""))
    }
}
