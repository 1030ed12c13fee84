@testable import RunLoopZMQ
import XCTest

/// The process's ZAP handler (RFC 27) answers every request: by the policy of its domain,
/// 200 with the client's key for a domain without one, 400 for what it cannot read.
final class ZMQAuthenticatorTests: XCTestCase {
    private func request(version: String = "1.0", domain: String, key: ZMQCurveKey?) -> [[UInt8]] {
        [[0, 1, 2, 3, 4], [], Array(version.utf8), Array("7".utf8), Array(domain.utf8), Array("127.0.0.1".utf8), [],
         Array((key == nil ? "NULL" : "CURVE").utf8)] + (key.map { [$0.bytes] } ?? [])
    }

    func testEachRequestIsAnsweredByItsDomainsPolicyOr200WithTheClientsKey() throws {
        let authenticator = try ZMQAuthenticator.shared()
        let (listed, _) = try ZMQCurve.generateKeyPair()
        let (other, _) = try ZMQCurve.generateKeyPair()
        let domain = "test.\(UInt32.random(in: .min ... .max))"
        authenticator.register(domain: domain) { $0.clientKey == listed ? .allow(userID: "listed") : .deny(reason: "no") }
        defer { authenticator.unregister(domain: domain) }

        let allowed = try XCTUnwrap(authenticator.answer(request(domain: domain, key: listed)))
        XCTAssertEqual(allowed.map { String(decoding: $0, as: UTF8.self) }.dropFirst(2),
                       ["1.0", "7", "200", "OK", "listed", ""])
        XCTAssertEqual(allowed[0], [0, 1, 2, 3, 4], "the reply goes back to the asking session")
        XCTAssertEqual(try XCTUnwrap(authenticator.answer(request(domain: domain, key: other)))[4], Array("400".utf8))
        let open = try XCTUnwrap(authenticator.answer(request(domain: "", key: other)))
        XCTAssertEqual(open[4], Array("200".utf8))
        XCTAssertEqual(String(decoding: open[6], as: UTF8.self), other.z85)
        XCTAssertEqual(try XCTUnwrap(authenticator.answer(request(version: "2.0", domain: "", key: other)))[4],
                       Array("400".utf8))
        XCTAssertNil(authenticator.answer([[1], [], Array("1.0".utf8)]), "not a ZAP request")
    }
}
