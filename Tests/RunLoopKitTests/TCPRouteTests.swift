@testable import RunLoopKit
import XCTest

/// Finding the local end of the route to a tcp peer, where a reply port binds.
final class TCPRouteTests: XCTestCase {
    private func parts(_ endpoint: String) throws -> [String]? {
        let address = try PortAddress(validating: endpoint)
        return TCPRoute.hostAndPort(of: address).map { [$0.host, $0.port] }
    }

    func testHostAndPortAreReadFromEveryFormOfTCPEndpoint() throws {
        XCTAssertEqual(try parts("tcp://127.0.0.1:5555"), ["127.0.0.1", "5555"])
        XCTAssertEqual(try parts("tcp://example.org:80"), ["example.org", "80"])
        XCTAssertEqual(try parts("tcp://[::1]:5555"), ["::1", "5555"])
        XCTAssertEqual(try parts("tcp://eth0;192.0.2.1:5555"), ["192.0.2.1", "5555"], "libzmq's source;destination form")
        XCTAssertNil(try parts("tcp://nohost"))
        XCTAssertNil(try parts("ipc:///tmp/x.sock"))
        XCTAssertNil(try parts("inproc://x:1"))
    }

    func testTheRouteToALoopbackPeerStartsOnTheLoopback() throws {
        XCTAssertEqual(try TCPRoute.localHost(toward: "127.0.0.1", port: "9"), "127.0.0.1")
        let local = try TCPRoute.localHost(toward: "localhost", port: "9")
        XCTAssertTrue(local.hasPrefix("127.") || local == "::1", local)
    }

    func testEndpointsPutIPv6HostsInBrackets() {
        XCTAssertEqual(TCPRoute.endpoint(host: "127.0.0.1", port: "*"), "tcp://127.0.0.1:*")
        XCTAssertEqual(TCPRoute.endpoint(host: "::1", port: "5555"), "tcp://[::1]:5555")
    }

    func testAPortThatIsNotANumberIsAnInvalidAddress() {
        XCTAssertThrowsError(try TCPRoute.localHost(toward: "127.0.0.1", port: "not-a-port")) { error in
            guard case PortError.invalidAddress = error else { return XCTFail("\(error)") }
        }
    }
}
