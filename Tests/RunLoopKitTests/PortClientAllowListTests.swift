import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// A CURVE port's client allow-list (`docs/security.md`): listed clients get through, over
/// tcp loopback and from other processes; any other client is refused in the handshake
/// with `notAuthorized`, never reaches the handler, and is counted; the directory reloads.
final class PortClientAllowListTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    /// A CURVE port on tcp loopback (or, with a `name`, on ipc), with `clients` as its
    /// allow-list, that answers each request with "ok:" and the request's text and records
    /// what reached its handler.
    private final class Server {
        let keys: PortKeyPair
        let port: LocalPort
        let address: PortAddress
        var received: [(text: String, sender: MessageSender?)] = []

        init(allowing clients: PortClientAllowList, name: String? = nil) throws {
            keys = try PortKeyPair.generate()
            var record: (String, MessageSender?) -> Void = { _, _ in }
            port = try LocalPort { message in
                record(message.text ?? "", message.sender)
                return LoopMessage(id: 0, text: "ok:\(message.text ?? "")")
            }
            try port.requireCurve(keys, allowing: clients)
            if let name {
                try port.register(name: name)
                address = port.remote.address
            } else {
                address = try port.bind(tcp: "tcp://127.0.0.1:*")
                PortDirectory.shared.removeAlias(address) // behave as a peer on another machine would
            }
            ThreadRunLoop.current.add(port, to: .default)
            record = { [unowned self] in received.append(($0, $1)) }
        }

        func remote(as client: PortKeyPair?) throws -> RemotePort {
            try RemotePort(address, curveServerKey: keys.publicKey, clientKeys: client)
        }
    }

    /// Makes a request from a new thread (a new connection) while this thread's loop
    /// serves the port; a deadline far beyond the test's, so a refusal must come from the handshake.
    private func request(_ remote: RemotePort, _ text: String) -> Result<String, PortError> {
        let outcome = LockedValue<Result<String, PortError>?>(nil)
        let loop = self.loop
        let thread = TestThread {
            let result = Result { () throws(PortError) in
                try remote.sendRequest(LoopMessage(id: 3, text: text), sendTimeout: .seconds(60),
                                       receiveTimeout: .seconds(60)).text ?? ""
            }
            outcome.withLock { $0 = result }
            loop.stop()
        }
        XCTAssertTrue(runCurrentLoop(safetyNet: .seconds(60)) { outcome.withLock { $0 != nil } })
        thread.join()
        _ = loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: true) // a late stop
        return outcome.withLock { $0 } ?? .failure(.invalidated)
    }

    private func temporaryDirectory() throws -> String {
        var template = Array("/tmp/runloopkit-keys-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXError(.EIO) }
        let path = String(cString: made)
        addTeardownBlock { _ = try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    func testAClientOnTheListGetsItsReplyAndTheHandlerSeesItsKey() throws {
        let client = try PortKeyPair.generate()
        let server = try Server(allowing: try PortClientAllowList(publicKeys: [client.publicKey]))
        defer { server.port.invalidate() }
        XCTAssertEqual(try request(try server.remote(as: client), "hello").get(), "ok:hello")
        XCTAssertEqual(server.received.map(\.text), ["hello"])
        XCTAssertEqual(server.received.first?.sender, .curveKey(client.publicKey))
        XCTAssertEqual(server.port.statistics.clientsRefused, 0)
    }

    func testAClientNotOnTheListIsRefusedInTheHandshakeNeverReachesTheHandlerAndIsCounted() throws {
        let listed = try PortKeyPair.generate()
        let stranger = try PortKeyPair.generate()
        let server = try Server(allowing: try PortClientAllowList(publicKeys: [listed.publicKey]))
        defer { server.port.invalidate() }
        let started = Deadline.now()
        for remote in [try server.remote(as: stranger), try server.remote(as: nil)] { // nil: a fresh key per connection
            let outcome = request(remote, "let me in")
            guard case .failure(.notAuthorized(let refused)) = outcome else {
                return XCTFail("an unlisted client: \(outcome)")
            }
            XCTAssertEqual(refused, server.address)
        }
        XCTAssertLessThan(Deadline.now() - started, .seconds(30), "refused in the handshake, not at the 60 s deadline")
        XCTAssertEqual(loop.run(mode: .default, timeout: .milliseconds(100), returnAfterSourceHandled: true), .timedOut)
        XCTAssertTrue(server.received.isEmpty, "nothing of an unlisted client reached the handler: \(server.received)")
        XCTAssertGreaterThanOrEqual(server.port.statistics.clientsRefused, 2)
        XCTAssertEqual(server.port.statistics.messagesReceived, 0)
        // The listed client still gets through.
        XCTAssertEqual(try request(try server.remote(as: listed), "me").get(), "ok:me")
    }

    func testReloadingTheDirectoryAdmitsAnAddedKeyAndRefusesARemovedOne() throws {
        let directory = try temporaryDirectory()
        let first = try PortKeyPair.generate()
        let second = try PortKeyPair.generate()
        try first.writePublicKey(to: "\(directory)/first.key")
        let clients = try PortClientAllowList(directory: directory)
        let server = try Server(allowing: clients)
        defer { server.port.invalidate() }
        XCTAssertEqual(try request(try server.remote(as: first), "a").get(), "ok:a")
        guard case .failure(.notAuthorized) = request(try server.remote(as: second), "b") else {
            return XCTFail("a key not yet in the directory got through")
        }

        try second.writePublicKey(to: "\(directory)/second.key")
        XCTAssertEqual(unlink("\(directory)/first.key"), 0)
        guard case .failure(.notAuthorized) = request(try server.remote(as: second), "c") else {
            return XCTFail("the directory was read again without reload()")
        }
        try clients.reload()
        XCTAssertEqual(try request(try server.remote(as: second), "d").get(), "ok:d")
        guard case .failure(.notAuthorized) = request(try server.remote(as: first), "e") else {
            return XCTFail("a key removed from the directory still got through after reload()")
        }
        XCTAssertEqual(server.received.map(\.text), ["a", "d"])
        XCTAssertEqual(server.received.map(\.sender), [.curveKey(first.publicKey), .curveKey(second.publicKey)])
        // Each refused handshake counts (a sender tries twice before it reports `notAuthorized`).
        XCTAssertGreaterThanOrEqual(server.port.statistics.clientsRefused, 3)
    }

    /// Runs the Python security peer as `client`, sending `text` to `server` over CURVE.
    private func peer(_ client: PortKeyPair, _ text: String, to server: Server) throws -> SecurityPeerRun {
        try runSecurityPeer(["--endpoint", server.address.rawValue, "--text", text, "--server-key=\(server.keys.publicKey)",
                             "--public-key=\(client.publicKey)", "--secret-key=\(client.secretCurveKey.z85)"])
    }

    func testClientProcessesOnTheListGetTheirReplyAndOthersAreRefusedWithStatus400() throws {
        let listed = try PortKeyPair.generate()
        let stranger = try PortKeyPair.generate()
        let server = try Server(allowing: try PortClientAllowList(publicKeys: [listed.publicKey]))
        defer { server.port.invalidate() }
        XCTAssertEqual(try peer(listed, "from a listed process", to: server).verdict, "reply ok:from a listed process")
        XCTAssertEqual(try peer(stranger, "from a stranger", to: server).verdict, "refused 400")
        XCTAssertEqual(server.received.map(\.text), ["from a listed process"])
        XCTAssertEqual(server.received.first?.sender, .curveKey(listed.publicKey))
        XCTAssertGreaterThanOrEqual(server.port.statistics.clientsRefused, 1) // libzmq may try again before the peer exits
    }

    func testOverIPCAListedClientProcessGetsItsReplyAsItsKeyAndAnUnlistedOneIsRefused() throws {
        let listed = try PortKeyPair.generate()
        let stranger = try PortKeyPair.generate()
        let server = try Server(allowing: try PortClientAllowList(publicKeys: [listed.publicKey]),
                                name: "allow-list-ipc-\(getpid())-\(UInt32.random(in: .min ... .max))")
        defer { server.port.invalidate() }
        XCTAssertTrue(server.address.rawValue.hasPrefix("ipc://"), "\(server.address)")
        XCTAssertEqual(try peer(listed, "over ipc", to: server).verdict, "reply ok:over ipc")
        XCTAssertEqual(try peer(stranger, "a stranger over ipc", to: server).verdict, "refused 400")
        XCTAssertEqual(server.received.map(\.text), ["over ipc"])
        XCTAssertEqual(server.received.map(\.sender), [.curveKey(listed.publicKey)],
                       "a CURVE port's ipc client is known by its key, as its handshake proved it")
        XCTAssertGreaterThanOrEqual(server.port.statistics.clientsRefused, 1)
    }

    func testAPortWithoutAnAllowListStillAdmitsEveryClientThatKnowsItsKey() throws {
        // The process's ZAP handler answers for every CURVE port; one without a list is open.
        let keys = try PortKeyPair.generate()
        let port = try LocalPort { message in LoopMessage(id: 0, text: "open:\(message.text ?? "")") }
        defer { port.invalidate() }
        try port.requireCurve(keys)
        let address = try port.bind(tcp: "tcp://127.0.0.1:*")
        PortDirectory.shared.removeAlias(address)
        loop.add(port, to: .default)
        let client = try PortKeyPair.generate()
        XCTAssertEqual(try request(try RemotePort(address, curveServerKey: keys.publicKey, clientKeys: client), "x").get(),
                       "open:x")
    }

    func testTheDirectoryReadsCZMQCertificatesAndBareZ85Keys() throws {
        let directory = try temporaryDirectory()
        let czmq = try PortKeyPair.generate()
        let bare = try PortKeyPair.generate()
        let secret = try PortKeyPair.generate()
        try czmq.writePublicKey(to: "\(directory)/czmq.key")
        try "\(bare.publicKey)\n".write(toFile: "\(directory)/bare.key", atomically: false, encoding: .utf8)
        try secret.write(to: "\(directory)/secret.key_secret") // a secret certificate holds the public key too
        try "ignored".write(toFile: "\(directory)/.hidden", atomically: false, encoding: .utf8)
        let clients = try PortClientAllowList(directory: directory)
        XCTAssertEqual(clients.count, 3)
        for key in [czmq, bare, secret] { XCTAssertTrue(clients.contains(publicKey: key.publicKey)) }
        XCTAssertFalse(clients.contains(publicKey: try PortKeyPair.generate().publicKey))
    }

    func testADirectoryOrKeyFileOthersMayWriteToOrAFileWithoutAKeyIsRefused() throws {
        let directory = try temporaryDirectory()
        try PortKeyPair.generate().writePublicKey(to: "\(directory)/one.key")
        XCTAssertEqual(chmod(directory, 0o777), 0)
        XCTAssertThrowsError(try PortClientAllowList(directory: directory)) {
            guard case .keyFileUnsafe(directory, _) = $0 as? PortError else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(chmod(directory, 0o700), 0)
        XCTAssertEqual(chmod("\(directory)/one.key", 0o666), 0)
        XCTAssertThrowsError(try PortClientAllowList(directory: directory)) {
            guard case .keyFileUnsafe(let path, _) = $0 as? PortError, path.hasSuffix("one.key") else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(chmod("\(directory)/one.key", 0o644), 0)
        let clients = try PortClientAllowList(directory: directory)
        try "not a key\n".write(toFile: "\(directory)/two.key", atomically: false, encoding: .utf8)
        XCTAssertThrowsError(try clients.reload()) {
            guard case .invalidKey = $0 as? PortError else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(clients.count, 1, "a failed reload keeps the keys the list had")
        XCTAssertThrowsError(try PortClientAllowList(publicKeys: ["short"]))
    }
}
