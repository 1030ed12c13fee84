import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// `LoopMessage.sender` (`docs/security.md`): the peer process's uid, gid and pid over
/// ipc, the client's CURVE key over tcp with CURVE (see `PortClientAllowListTests` for
/// the allow-listed case), nothing from this process or over tcp without CURVE.
final class MessageSenderTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    /// A port that answers "seen" and records each message's sender.
    private func recordingPort(name: String? = nil) throws -> (LocalPort, () -> [MessageSender?]) {
        final class Box { var senders: [MessageSender?] = [] }
        let box = Box()
        let port = try LocalPort(name: name) { message in
            box.senders.append(message.sender)
            return LoopMessage(id: 0, text: "seen")
        }
        loop.add(port, to: .default)
        return (port, { box.senders })
    }

    func testAMessageOverIPCNamesTheSendingProcessByItsUidGidAndPid() throws {
        let (port, senders) = try recordingPort(name: "sender-test-\(getpid())-\(UInt32.random(in: .min ... .max))")
        defer { port.invalidate() }
        let run = try runSecurityPeer(["--endpoint", port.remote.address.rawValue, "--text", "who am I"])
        XCTAssertEqual(run.verdict, "reply seen")
        XCTAssertGreaterThan(run.pid, 0)
        XCTAssertNotEqual(run.pid, getpid())
        XCTAssertEqual(senders(), [.process(uid: getuid(), gid: getgid(), pid: run.pid)],
                       "the child's own pid, as the kernel gave it (SO_PEERCRED)")
    }

    func testEveryMessageOfABurstOverIPCNamesTheSendingProcess() throws {
        // libzmq's ROUTER gives the routing-id frame of a message it prefetched no metadata:
        // the sender is read from a frame the connection delivered.
        let (port, senders) = try recordingPort(name: "sender-burst-\(getpid())-\(UInt32.random(in: .min ... .max))")
        defer { port.invalidate() }
        let run = try runSecurityPeer(["--endpoint", port.remote.address.rawValue, "--text", "who am I", "--burst", "200"])
        XCTAssertEqual(run.verdict, "reply seen")
        let expected = MessageSender.process(uid: getuid(), gid: getgid(), pid: run.pid)
        XCTAssertEqual(senders().count, 201)
        XCTAssertEqual(senders().filter { $0 != expected }.count, 0, "every message of the burst, and the request")
    }

    func testAMessageOverTCPWithCurveNamesTheClientByItsKey() throws {
        let keys = try PortKeyPair.generate()
        let client = try PortKeyPair.generate()
        let (port, senders) = try recordingPort()
        defer { port.invalidate() }
        try port.requireCurve(keys)
        let address = try port.bind(tcp: "tcp://127.0.0.1:*")
        let run = try runSecurityPeer(["--endpoint", address.rawValue, "--text", "hi", "--server-key=\(keys.publicKey)",
                                       "--public-key=\(client.publicKey)", "--secret-key=\(client.secretCurveKey.z85)"])
        XCTAssertEqual(run.verdict, "reply seen")
        XCTAssertEqual(senders(), [.curveKey(client.publicKey)])
    }

    func testMessagesFromThisProcessAndOverTCPWithoutCurveHaveNoSender() throws {
        let (port, senders) = try recordingPort()
        defer { port.invalidate() }
        let address = try port.bind(tcp: "tcp://127.0.0.1:*")
        try port.send(LoopMessage(id: 1, text: "inproc"))
        XCTAssertTrue(runCurrentLoop { senders().count == 1 })
        let run = try runSecurityPeer(["--endpoint", address.rawValue, "--text", "plain tcp"])
        XCTAssertEqual(run.verdict, "reply seen")
        XCTAssertEqual(senders(), [nil, nil])
    }

    /// Runs `Tests/peers/zmtp_forger.py` (raw ZMTP 3.0, no libzmq) against `endpoint`: its
    /// READY offers a well-formed CURVE key it does not hold as "User-Id" and pid 1 of another
    /// user as "Peer-Address".
    private func runForger(_ endpoint: String, text: String) throws -> (run: SecurityPeerRun, forgedKey: String) {
        let forgedKey = try PortKeyPair.generate().publicKey
        // `--user-id=KEY`, one argument: a Z85 key may begin with "-", which argparse would
        // take for an option of its own.
        let run = try runSecurityPeer(["--endpoint", endpoint, "--text", text, "--user-id=\(forgedKey)",
                                       "--peer-address", "localhost:4242:4242:1"], script: "zmtp_forger.py")
        return (run, forgedKey)
    }

    func testAForgedUserIdOrPeerAddressOverTCPIsNotTakenAsTheSender() throws {
        let (port, senders) = try recordingPort()
        defer { port.invalidate() }
        let address = try port.bind(tcp: "tcp://127.0.0.1:*")
        let (run, forgedKey) = try runForger(address.rawValue, text: "I am someone else")
        XCTAssertEqual(run.verdict, "reply seen")
        XCTAssertEqual(senders(), [nil], "a peer's own READY properties prove nothing (forged key \(forgedKey))")
    }

    func testAForgedUserIdOrPeerAddressOverIPCLeavesTheSenderTheKernelsCredentials() throws {
        let (port, senders) = try recordingPort(name: "forger-test-\(getpid())-\(UInt32.random(in: .min ... .max))")
        defer { port.invalidate() }
        let (run, forgedKey) = try runForger(port.remote.address.rawValue, text: "I am root")
        XCTAssertEqual(run.verdict, "reply seen")
        XCTAssertEqual(senders(), [.process(uid: getuid(), gid: getgid(), pid: run.pid)],
                       "the kernel's credentials of the Python process (SO_PEERCRED), not forged key \(forgedKey)")
    }

    func testOnlyAnIPCPeerAddressWithUidGidAndPidMakesAProcessSender() {
        func parse(_ text: String) -> MessageSender? { MessageSender.process(fromPeerAddress: Array(text.utf8)) }
        XCTAssertEqual(parse("localhost:1000:100:4242"), .process(uid: 1000, gid: 100, pid: 4242))
        XCTAssertEqual(parse(":0:0:1"), .process(uid: 0, gid: 0, pid: 1))
        for text in ["127.0.0.1", "::1", "fe80::1:2", "1::2:3", "localhost:1:2", "localhost:a:2:3",
                     "localhost:1:2:99999999999", "localhost:1:2:3:4", "", "localhost::2:3"] {
            XCTAssertNil(parse(text), text)
        }
    }

    func testOnlyFortyCharactersOfZ85ThatDecodeMakeAKeySender() throws {
        func parse(_ text: String) -> MessageSender? { MessageSender.curveKey(fromUserID: Array(text.utf8)) }
        let key = try PortKeyPair.generate().publicKey
        XCTAssertEqual(parse(key), .curveKey(key))
        for text in ["", "me", String(key.dropLast()), key + "0", String(key.dropLast()) + "\"", // '"' is not Z85
                     String(repeating: "#", count: 40), "localhost:1000:1000:4242"] {
            XCTAssertNil(parse(text), text)
        }
    }

    func testTheSenderIsNotPartOfAMessagesEquality() {
        var received = LoopMessage(id: 1, text: "x")
        received.sender = .process(uid: 1, gid: 1, pid: 1)
        XCTAssertEqual(received, LoopMessage(id: 1, text: "x"))
        XCTAssertNotEqual(received, LoopMessage(id: 2, text: "x"))
    }
}
