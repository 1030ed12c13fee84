import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopWire
import RunLoopZMQ
import XCTest

/// What `docs/wire-format.md` tells a peer written from it alone beyond the frames' layout,
/// each checked against a port: how the frame cap counts, the empty reply, the name's lock,
/// which letters a name may have, and what a client with a wrong server key sees.
final class WireDocumentTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    func testTheFrameCapCountsTheRoutingIdAndAMessageOverItIsAFailedReceiveNotAMalformedOne() throws {
        let mode = LoopMode("frame-cap-\(UInt32.random(in: 0...UInt32.max))")
        var delivered: [Int32] = []
        let port = try LocalPort { message in delivered.append(message.id); return nil }
        defer { port.invalidate() }
        loop.add(port, to: mode)
        let raw = try ZMQSocket(type: .dealer)
        defer { raw.close() }
        try raw.connect(port.inProcessAddress.rawValue)
        let valid = WireCodec.encode(LoopMessage(id: 42).wire(kind: .message))
        XCTAssertEqual(valid.count, 1)
        let before = loop.snapshot().counters
        // 1,099 frames from the DEALER, 1,100 with the routing id the port's ROUTER puts
        // first: within the cap, read whole and rejected by the decoder (its frame count).
        XCTAssertTrue(try raw.send(valid + Array(repeating: [], count: 1_098), dontWait: false))
        // 1,100 frames, 1,101 with the routing id: over the cap, the rest discarded unread.
        XCTAssertTrue(try raw.send(valid + Array(repeating: [], count: 1_099), dontWait: false))
        XCTAssertTrue(try raw.send(valid, dontWait: false))
        XCTAssertTrue(runCurrentLoop(in: mode) { delivered == [42] })
        let after = loop.snapshot().counters
        XCTAssertEqual(after.messagesDropped[.malformed]! - before.messagesDropped[.malformed]!, 1)
        XCTAssertEqual(after.messagesDropped[.receiveFailed]! - before.messagesDropped[.receiveFailed]!, 1)
        XCTAssertEqual(port.statistics.messagesDropped, 2)
    }

    func testARequestWhoseHandlerReturnsNothingIsAnsweredWithTheDocumentedHeaderOnlyReply() throws {
        var handled = 0
        let port = try LocalPort { _ in handled += 1; return nil }
        defer { port.invalidate() }
        loop.add(port, to: .default)
        let raw = try ZMQSocket(type: .dealer)
        defer { raw.close() }
        try raw.connect(port.inProcessAddress.rawValue)
        XCTAssertTrue(try raw.send([try WireDocument.hex(after: "the empty request's frame 0 in hex: `")], dontWait: false))
        XCTAssertTrue(runCurrentLoop { handled == 1 })
        XCTAssertEqual(try raw.poll(for: .pollIn, timeout: .seconds(10)), .pollIn, "the reply is sent as the handler returns")
        XCTAssertEqual(try raw.receive(dontWait: true), [try WireDocument.hex(after: "its reply's frame 0 in hex: `")])
    }

    func testANamesLockIsAnExclusiveLockOnTheWholeFileThatFGetlkAndFOFDGetlkSee() throws {
        let name = "lock-probe-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let port = try LocalPort(name: name)
        defer { port.invalidate() }
        let fd = open("\(try RuntimeDirectory.path())/\(name).lock", O_RDONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        let ofdGetLock: Int32 = 36 // F_OFD_GETLK, which glibc hides behind _GNU_SOURCE
        for (command, label) in [(F_GETLK, "F_GETLK"), (ofdGetLock, "F_OFD_GETLK")] {
            // A shared (read) lock on one byte far past the pid conflicts only with an
            // exclusive lock that covers it: the owner's covers the whole file.
            var probe = flock()
            probe.l_type = Int16(F_RDLCK)
            probe.l_whence = Int16(SEEK_SET)
            probe.l_start = 1 << 40
            probe.l_len = 1
            probe.l_pid = 0 // F_OFD_GETLK requires 0
            XCTAssertEqual(fcntl(fd, command, &probe), 0, "\(label): errno \(errno)")
            XCTAssertEqual(probe.l_type, Int16(F_WRLCK), "\(label): the owner's lock is exclusive")
            XCTAssertEqual(probe.l_start, 0, label)
            XCTAssertEqual(probe.l_len, 0, "\(label): to the end of the file and beyond")
        }
        port.invalidate()
        XCTAssertNil(try NameLock.liveOwner(name: name, directory: try RuntimeDirectory.path()))
    }

    func testANamesLettersAreASCIIOnly() throws {
        for name in ["café", "Ωmega", "ｗｉｄｅ", "name\u{301}"] {
            XCTAssertThrowsError(try PortName.validate(name), name) {
                guard case .invalidName(name, _)? = $0 as? PortError else { return XCTFail("\($0) for \(name)") }
            }
        }
        XCTAssertNoThrow(try PortName.validate("Aa-Zz_09.x"))
    }

    func testAForeignClientWithAWrongServerKeySeesItsHandshakeFailWithoutAStatusAndNoReply() throws {
        let keys = try PortKeyPair.generate()
        let wrong = try PortKeyPair.generate()
        let client = try PortKeyPair.generate()
        var handled = 0
        let port = try LocalPort { _ in handled += 1; return nil }
        defer { port.invalidate() }
        try port.requireCurve(keys, allowing: try PortClientAllowList(publicKeys: [client.publicKey]))
        let address = try port.bind(tcp: "tcp://127.0.0.1:*")
        loop.add(port, to: .default)
        let run = try runSecurityPeer(["--endpoint", address.rawValue, "--text", "hello", "--server-key=\(wrong.publicKey)",
                                       "--public-key=\(client.publicKey)", "--secret-key=\(client.secretCurveKey.z85)"])
        XCTAssertEqual(run.verdict, "handshake failed", "no ZAP status: the port's handler is never asked")
        XCTAssertEqual(handled, 0)
        XCTAssertEqual(port.statistics.clientsRefused, 0, "a wrong server key is no refusal by the allow-list")
    }
}
