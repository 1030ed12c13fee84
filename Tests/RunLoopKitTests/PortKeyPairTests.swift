import Foundation
@testable import RunLoopKit
import XCTest

/// CURVE on tcp ports: only clients that know the port's public key get through.
final class PortKeyPairTests: XCTestCase {
    private func securedPort(_ keys: PortKeyPair, received: @escaping (String) -> Void) throws -> (LocalPort, PortAddress) {
        let port = try LocalPort { message in received(message.text ?? ""); return nil }
        try port.requireCurve(keys)
        let address = try port.bind(tcp: "tcp://127.0.0.1:*")
        ThreadRunLoop.current.add(port, to: .default)
        return (port, address)
    }

    /// Sends from another thread (no in-process shortcut: the address is the tcp one).
    private func sendFromAnotherThread(to remote: RemotePort, _ text: String) -> PortError? {
        let failure = LockedValue<PortError?>(nil)
        TestThread {
            do { try remote.send(LoopMessage(id: 1, text: text), timeout: .milliseconds(500)) } catch {
                failure.withLock { $0 = error as? PortError }
            }
        }.join()
        return failure.withLock { $0 }
    }

    func testAClientThatKnowsTheServerKeyGetsThroughEncrypted() throws {
        let keys = try PortKeyPair.generate()
        var received: [String] = []
        let (port, address) = try securedPort(keys) { received.append($0) }
        PortDirectory.shared.removeAlias(address) // behave as a peer on another machine would
        XCTAssertNil(sendFromAnotherThread(to: try RemotePort(address, curveServerKey: keys.publicKey), "secret hello"))
        let limit = Deadline.after(.seconds(20))
        while received.isEmpty && Deadline.now() < limit {
            ThreadRunLoop.current.run(mode: .default, before: limit)
        }
        XCTAssertEqual(received, ["secret hello"])
        port.invalidate()
    }

    func testClientsWithoutTheKeyOrWithAWrongKeyAreRejected() throws {
        let keys = try PortKeyPair.generate()
        let impostor = try PortKeyPair.generate()
        var received: [String] = []
        let (port, address) = try securedPort(keys) { received.append($0) }
        PortDirectory.shared.removeAlias(address)
        XCTAssertEqual(sendFromAnotherThread(to: RemotePort(address), "plain"), .sendTimedOut(address))
        XCTAssertEqual(sendFromAnotherThread(to: try RemotePort(address, curveServerKey: impostor.publicKey), "wrong key"),
                       .sendTimedOut(address))
        XCTAssertEqual(ThreadRunLoop.current.run(mode: .default, timeout: .milliseconds(200), returnAfterSourceHandled: true),
                       .timedOut)
        XCTAssertEqual(received, [], "nothing from a client without the key reached the handler")
        port.invalidate()
    }

    func testCurveMustBeRequiredBeforeThePortHasIPCOrTCPEndpoints() throws {
        let port = try LocalPort()
        try port.bind(tcp: "tcp://127.0.0.1:*")
        XCTAssertThrowsError(try port.requireCurve(try PortKeyPair.generate()))
        port.invalidate()
    }

    func testAKeyPairNeverShowsItsSecretKey() throws {
        let keys = try PortKeyPair.generate()
        XCTAssertEqual(keys.publicKey.count, 40)
        XCTAssertFalse("\(keys)".contains(keys.secretCurveKey.z85))
        XCTAssertFalse(String(reflecting: keys).contains(keys.secretCurveKey.z85))
        var dumped = ""
        dump(keys, to: &dumped)
        XCTAssertFalse(dumped.contains(keys.secretCurveKey.z85.prefix(8)), "not even a prefix in a dump")
        XCTAssertNotNil(PortKeyPair(publicKey: keys.publicKey, secretKey: keys.secretCurveKey.z85))
        XCTAssertNil(PortKeyPair(publicKey: "short", secretKey: "short"))
        XCTAssertThrowsError(try RemotePort(PortAddress(rawValue: "tcp://127.0.0.1:1")!, curveServerKey: "not a key"))
    }
}
