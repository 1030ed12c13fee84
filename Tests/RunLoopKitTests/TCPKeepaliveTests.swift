import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopZMQ
import XCTest

/// Every tcp connection a port makes or accepts has the kernel's keepalive, the watch a tcp
/// peer has unless ZMTP heartbeats are set (`TCPKeepalive`, `docs/reliability.md`).
final class TCPKeepaliveTests: XCTestCase {
    func testAConnectionAPortAcceptsOverTCPHasTheKernelsKeepalive() throws {
        let port = try LocalPort { _ in nil }
        defer { port.invalidate() }
        let portNumber = try Self.portNumber(of: port.bind(tcp: "tcp://127.0.0.1:*"))
        let peer = try ZMQSocket(type: .dealer) // a peer of the test's, without keepalive
        defer { peer.close() }
        try peer.connect("tcp://127.0.0.1:\(portNumber)")
        XCTAssertTrue(waitUntil { Self.connectedTCPSockets(to: portNumber).count == 2 }, "the port accepted the peer")
        let accepted = Self.connectedTCPSockets(to: portNumber).filter { Self.portNumber(of: $0, peer: false) == portNumber }
        XCTAssertEqual(accepted.count, 1)
        for fd in accepted { Self.assertKeepalive(fd) }
    }

    func testAConnectionASenderMakesOverTCPHasTheKernelsKeepalive() throws {
        let router = try ZMQSocket(type: .router) // a port of the test's, without keepalive
        defer { router.close() }
        try router.bind("tcp://127.0.0.1:*")
        let address = try PortAddress(validating: try router.lastEndpoint)
        let portNumber = try Self.portNumber(of: address)
        try RemotePort(address).send(LoopMessage(id: 1)) // returns once the connection is made
        let made = Self.connectedTCPSockets(to: portNumber).filter { Self.portNumber(of: $0, peer: true) == portNumber }
        XCTAssertEqual(made.count, 1, "this thread's connection to the router")
        for fd in made { Self.assertKeepalive(fd) }
    }

    /// The values `PortHeartbeat`'s documentation states.
    private static func assertKeepalive(_ fd: Int32, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(option(fd, SOL_SOCKET, SO_KEEPALIVE), 1, "keepalive on", file: file, line: line)
        XCTAssertEqual(option(fd, Int32(IPPROTO_TCP), TCP_KEEPIDLE), 2, "first probe after 2 quiet seconds", file: file, line: line)
        XCTAssertEqual(option(fd, Int32(IPPROTO_TCP), TCP_KEEPINTVL), 1, "then one a second", file: file, line: line)
        XCTAssertEqual(option(fd, Int32(IPPROTO_TCP), TCP_KEEPCNT), 3, "three unanswered close it", file: file, line: line)
    }

    private static func portNumber(of address: PortAddress) throws -> UInt16 {
        try XCTUnwrap(UInt16(address.rawValue.split(separator: ":").last ?? ""), "\(address)")
    }

    /// This process's connected IPv4 stream sockets whose local or peer port is `port`.
    private static func connectedTCPSockets(to port: UInt16) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.compactMap(Int32.init).filter { fd in
            guard option(fd, SOL_SOCKET, SO_DOMAIN) == AF_INET, option(fd, SOL_SOCKET, SO_TYPE) == Int32(SOCK_STREAM.rawValue)
            else { return false }
            guard let peer = portNumber(of: fd, peer: true), let local = portNumber(of: fd, peer: false) else { return false }
            return peer == port || local == port
        }
    }

    private static func option(_ fd: Int32, _ level: Int32, _ name: Int32) -> Int32? {
        var value: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(fd, level, name, &value, &size) == 0 ? value : nil
    }

    /// The port of `fd`'s local or peer address; nil when it has none (not connected).
    private static func portNumber(of fd: Int32, peer: Bool) -> UInt16? {
        var address = sockaddr_in()
        var size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { peer ? getpeername(fd, $0, &size) : getsockname(fd, $0, &size) }
        }
        return result == 0 ? UInt16(bigEndian: address.sin_port) : nil
    }
}
