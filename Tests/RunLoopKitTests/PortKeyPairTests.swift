import Foundation
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// CURVE on tcp ports: only clients that know the port's public key get through, and
/// requests get their replies encrypted over the same connection.
final class PortKeyPairTests: XCTestCase {
    private func securedPort(_ keys: PortKeyPair, reply: String? = nil,
                             received: @escaping (String) -> Void) throws -> (LocalPort, PortAddress) {
        let port = try LocalPort { message in
            received(message.text ?? "")
            return reply.map { LoopMessage(id: 0, text: $0) }
        }
        try port.requireCurve(keys)
        let address = try port.bind(tcp: "tcp://127.0.0.1:*")
        ThreadRunLoop.current.add(port, to: .default)
        return (port, address)
    }

    /// Runs `body` on another thread while this thread's loop serves the port, and returns
    /// its outcome (no in-process shortcut: the addresses used are the tcp ones).
    private func onAnotherThread<Value: Sendable>(_ body: @escaping @Sendable () throws(PortError) -> Value)
        -> Result<Value, PortError> {
        let outcome = LockedValue<Result<Value, PortError>?>(nil)
        let loop = ThreadRunLoop.current
        let thread = TestThread {
            // Run outside the lock: the serving loop's condition takes it between passes.
            let result = Result(catching: body)
            outcome.withLock { $0 = result }
            loop.stop()
        }
        XCTAssertTrue(runCurrentLoop(safetyNet: .seconds(30)) { outcome.withLock { $0 != nil } })
        thread.join()
        // The run may have ended on the outcome before the stop came: take it now, so that
        // it does not end the test's next run.
        _ = loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: true)
        return outcome.withLock { $0 } ?? .failure(.invalidated)
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

    func testARequestToACurvePortGetsItsReplyOverTheSameEncryptedConnection() throws {
        let keys = try PortKeyPair.generate()
        let (port, address) = try securedPort(keys, reply: "secret answer") { _ in }
        PortDirectory.shared.removeAlias(address)
        let remote = try RemotePort(address, curveServerKey: keys.publicKey)
        let outcome = onAnotherThread { () throws(PortError) in
            try remote.sendRequest(LoopMessage(id: 4, text: "secret question"),
                                   sendTimeout: .seconds(10), receiveTimeout: .seconds(10))
        }
        let reply = try outcome.get()
        XCTAssertEqual(reply.text, "secret answer")
        XCTAssertEqual(reply.id, 4)
        port.invalidate()
    }

    func testClientsWithoutTheKeyOrWithAWrongKeyAreRefusedWithAnAuthenticationError() throws {
        let keys = try PortKeyPair.generate()
        let impostor = try PortKeyPair.generate()
        var received: [String] = []
        let (port, address) = try securedPort(keys) { received.append($0) }
        PortDirectory.shared.removeAlias(address)
        for (remote, what) in [(RemotePort(address), "no key"),
                               (try RemotePort(address, curveServerKey: impostor.publicKey), "a wrong key")] {
            // A deadline far beyond the test's: the refusal must come from the handshake.
            let outcome = onAnotherThread { () throws(PortError) in
                try remote.send(LoopMessage(id: 1, text: what), timeout: .seconds(60))
            }
            guard case .failure(.authenticationFailed(let refused, _)) = outcome else {
                return XCTFail("a client with \(what): \(outcome)")
            }
            XCTAssertEqual(refused, address)
        }
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
        XCTAssertThrowsError(try RemotePort(PortAddress(rawValue: "tcp://127.0.0.1:1")!, curveServerKey: "not a key")) {
            guard case .invalidKey = $0 as? PortError else { return XCTFail("a bad key is not a bad address: \($0)") }
        }
    }

    // MARK: - Key files

    private func temporaryPath() -> String {
        let path = "/tmp/runloopkit-keyfile-\(getpid())-\(UInt32.random(in: .min ... .max))"
        addTeardownBlock { unlink(path) }
        return path
    }

    private func mode(of path: String) -> mode_t {
        var info = stat()
        XCTAssertEqual(stat(path, &info), 0)
        return info.st_mode & 0o777
    }

    func testAKeyFileIsWrittenWithMode0600WhateverTheUmaskOrItsModeBefore() throws {
        let keys = try PortKeyPair.generate()
        let path = temporaryPath()
        let umaskBefore = umask(0)
        defer { umask(umaskBefore) }
        try keys.write(to: path)
        XCTAssertEqual(String(mode(of: path), radix: 8), "600")
        XCTAssertEqual(try PortKeyPair(contentsOf: path), keys)

        XCTAssertEqual(chmod(path, 0o644), 0)
        try keys.write(to: path) // rewriting a file that others could read closes it
        XCTAssertEqual(String(mode(of: path), radix: 8), "600")
        let text = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertTrue(text.contains("public-key = \"\(keys.publicKey)\""), "CZMQ's certificate format: \(text.prefix(60))")
    }

    func testAKeyFileOthersCanReadIsRefused() throws {
        let keys = try PortKeyPair.generate()
        let path = temporaryPath()
        try keys.write(to: path)
        for unsafe: mode_t in [0o644, 0o640, 0o604] {
            XCTAssertEqual(chmod(path, unsafe), 0)
            XCTAssertThrowsError(try PortKeyPair(contentsOf: path)) {
                guard case .keyFileUnsafe(path, let reason) = $0 as? PortError else { return XCTFail("\($0)") }
                XCTAssertTrue(reason.contains("chmod 600"), reason)
            }
        }
        XCTAssertEqual(chmod(path, 0o400), 0)
        XCTAssertEqual(try PortKeyPair(contentsOf: path), keys)
    }

    func testAKeyFileOfTwoZ85LinesIsReadAndOneWithoutAPairIsRefused() throws {
        let keys = try PortKeyPair.generate()
        let path = temporaryPath()
        try keys.write(to: path) // creates it 0600; overwritten below, mode kept
        try "\(keys.publicKey)\n\(keys.secretCurveKey.z85)\n".write(toFile: path, atomically: false, encoding: .utf8)
        XCTAssertEqual(try PortKeyPair(contentsOf: path), keys)
        try keys.writePublicKey(to: path)
        XCTAssertEqual(chmod(path, 0o600), 0)
        XCTAssertThrowsError(try PortKeyPair(contentsOf: path)) {
            guard case .invalidKey = $0 as? PortError else { return XCTFail("a public key alone is no pair: \($0)") }
        }
    }
}
