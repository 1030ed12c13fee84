@testable import RunLoopKit
import XCTest

/// Safe by default (`docs/security.md`): a port is bound to tcp beyond loopback without
/// CURVE only when the caller says `insecure`. Binds only: no traffic.
final class LocalPortTCPBindTests: XCTestCase {
    func testBindingTCPBeyondLoopbackWithoutCurveIsRefused() throws {
        let port = try LocalPort()
        defer { port.invalidate() }
        for endpoint in ["tcp://0.0.0.0:*", "tcp://*:*"] {
            XCTAssertThrowsError(try port.bind(tcp: endpoint)) {
                XCTAssertEqual($0 as? PortError, .insecureBind(endpoint))
            }
        }
        XCTAssertEqual(port.remote.address, port.inProcessAddress, "nothing was bound")
    }

    func testBindingTCPBeyondLoopbackIsAllowedWithInsecureOrWithCurve() throws {
        let open = try LocalPort()
        defer { open.invalidate() }
        let bound = try open.bind(tcp: "tcp://0.0.0.0:*", insecure: true)
        XCTAssertTrue(bound.rawValue.hasPrefix("tcp://0.0.0.0:"), bound.rawValue)

        let secured = try LocalPort()
        defer { secured.invalidate() }
        try secured.requireCurve(try PortKeyPair.generate())
        XCTAssertTrue(try secured.bind(tcp: "tcp://*:*").rawValue.hasPrefix("tcp://0.0.0.0:"))
    }

    func testLoopbackAddressesNeedNeitherCurveNorInsecure() throws {
        let port = try LocalPort()
        defer { port.invalidate() }
        XCTAssertNoThrow(try port.bind(tcp: "tcp://127.0.0.1:*"))
        for endpoint in ["tcp://127.0.0.1:5", "tcp://127.1.2.3:*", "tcp://localhost:7", "tcp://[::1]:*", "tcp://::1:9"] {
            XCTAssertTrue(LocalPort.isLoopback(tcpEndpoint: endpoint), endpoint)
        }
        for endpoint in ["tcp://0.0.0.0:*", "tcp://*:*", "tcp://10.0.0.1:1", "tcp://[::]:*", "tcp://eth0:5",
                         "tcp://127.0.0.1.example.com:5", "tcp://128.0.0.1:5", "tcp://lo:5"] {
            XCTAssertFalse(LocalPort.isLoopback(tcpEndpoint: endpoint), endpoint)
        }
    }

    /// libzmq takes a bind's host as an address or an interface name, and refuses
    /// `localhost` (`ENODEV`): the port binds it as `127.0.0.1`.
    func testBindingLocalhostBindsTheIPv4LoopbackAddress() throws {
        let port = try LocalPort()
        defer { port.invalidate() }
        let bound = try port.bind(tcp: "tcp://localhost:*")
        XCTAssertTrue(bound.rawValue.hasPrefix("tcp://127.0.0.1:"), "\(bound)")
        XCTAssertNotEqual(bound.rawValue, "tcp://127.0.0.1:*")
    }
}
