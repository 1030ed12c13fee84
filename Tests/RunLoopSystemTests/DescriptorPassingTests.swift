import Foundation
import Glibc
@testable import RunLoopSystem
import XCTest

/// Descriptors passed over unix packet sockets (`SCM_RIGHTS`) through the `Kernel` funnel:
/// the receiver's own descriptor, close-on-exec, none left open when both sides close theirs.
final class DescriptorPassingTests: XCTestCase {
    private func openDescriptors() throws -> Int {
        try Kernel.directoryEntries("/proc/self/fd").count
    }

    private func pipe() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        try systemCall("pipe") { Glibc.pipe(&ends) }
        for fd in ends { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return (ends[0], ends[1])
    }

    private func send(_ fd: Int32, _ text: String, _ descriptors: [Int32]) throws -> Bool {
        try Array(text.utf8).withUnsafeBytes { try Kernel.sendWithDescriptors(fd, $0, descriptors: descriptors) }
    }

    private func receive(_ fd: Int32, capacity: Int = 64) throws -> (String, ReceivedPacket)? {
        var buffer = [UInt8](repeating: 0, count: capacity)
        guard let packet = try buffer.withUnsafeMutableBytes({ try Kernel.receiveWithDescriptors(fd, into: $0) }) else { return nil }
        return (String(decoding: buffer.prefix(packet.byteCount), as: UTF8.self), packet)
    }

    func testAPipePassedOverAPacketPairIsReadBackThroughTheReceiversOwnCloseOnExecDescriptor() throws {
        let (sender, receiver) = try Kernel.unixPacketPair()
        defer { Kernel.close(sender); Kernel.close(receiver) }
        let ends = try pipe()
        XCTAssertTrue(try send(sender, "token", [ends.read]))
        let (text, packet) = try XCTUnwrap(try receive(receiver))
        XCTAssertEqual(text, "token")
        XCTAssertFalse(packet.truncated)
        let received = try XCTUnwrap(packet.descriptors.first)
        XCTAssertEqual(packet.descriptors.count, 1)
        XCTAssertNotEqual(received, ends.read, "a descriptor of its own")
        Kernel.close(ends.read) // the receiver's keeps the pipe open
        XCTAssertEqual(fcntl(received, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC, "close-on-exec from the moment it arrived")
        XCTAssertEqual(try Array("hello".utf8).withUnsafeBytes { try Kernel.write(ends.write, $0) }, 5)
        var bytes = [UInt8](repeating: 0, count: 5)
        XCTAssertEqual(try bytes.withUnsafeMutableBytes { try Kernel.read(received, into: $0) }, 5)
        XCTAssertEqual(String(decoding: bytes, as: UTF8.self), "hello")
        Kernel.close(received)
        Kernel.close(ends.write)
        XCTAssertNil(try receive(receiver), "nothing more queued, and the call did not wait")
    }

    func testTenThousandDescriptorsPassedAndClosedLeaveNoneOpen() throws {
        let before = try openDescriptors()
        let (sender, receiver) = try Kernel.unixPacketPair()
        let ends = try pipe()
        var passed = 0
        for round in 0..<(10_000 / 4) {
            XCTAssertTrue(try send(sender, "round \(round)", [ends.read, ends.write, ends.read, ends.write]))
            let (_, packet) = try XCTUnwrap(try receive(receiver))
            passed += packet.descriptors.count
            for fd in packet.descriptors { Kernel.close(fd) }
        }
        XCTAssertEqual(passed, 10_000)
        Kernel.close(ends.read); Kernel.close(ends.write)
        Kernel.close(sender); Kernel.close(receiver)
        XCTAssertEqual(try openDescriptors(), before, "every descriptor passed was closed")
    }

    func testAListenerAcceptsAConnectionMadeWithoutWaitingAndKnowsTheConnectingProcessFromTheKernel() throws {
        let path = NSTemporaryDirectory() + "passing-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).fds"
        let listener = try Kernel.unixPacketSocket()
        defer { Kernel.close(listener); try? Kernel.unlink(path) }
        try Kernel.listen(listener, atUnixPath: path, backlog: 8)
        XCTAssertNil(try Kernel.accept(listener), "no connection pending, and the call did not wait")
        let client = try Kernel.unixPacketSocket()
        defer { Kernel.close(client) }
        try Kernel.connect(client, toUnixPath: path)
        let ends = try pipe()
        defer { Kernel.close(ends.read); Kernel.close(ends.write) }
        XCTAssertTrue(try send(client, "before accept", [ends.write]), "queued at the listener's side before it accepts")
        let connection = try XCTUnwrap(try Kernel.accept(listener))
        defer { Kernel.close(connection) }
        let credentials = try Kernel.peerCredentials(connection)
        XCTAssertEqual(credentials.pid, getpid())
        XCTAssertEqual(credentials.uid, getuid())
        XCTAssertEqual(credentials.gid, getgid())
        let (text, packet) = try XCTUnwrap(try receive(connection))
        XCTAssertEqual(text, "before accept")
        packet.descriptors.forEach(Kernel.close)
        XCTAssertEqual(packet.descriptors.count, 1)
        Kernel.close(client)
        let (_, end) = try XCTUnwrap(try receive(connection))
        XCTAssertEqual(end, ReceivedPacket(byteCount: 0, descriptors: [], truncated: false), "the peer closed")
    }

    func testAPacketTooLongForTheBufferIsReportedTruncatedWithTheDescriptorsItCarried() throws {
        let (sender, receiver) = try Kernel.unixPacketPair()
        defer { Kernel.close(sender); Kernel.close(receiver) }
        let ends = try pipe()
        defer { Kernel.close(ends.read); Kernel.close(ends.write) }
        XCTAssertTrue(try send(sender, "a packet longer than eight bytes", [ends.read, ends.write]))
        let (text, packet) = try XCTUnwrap(try receive(receiver, capacity: 8))
        XCTAssertEqual(text, "a packet")
        XCTAssertTrue(packet.truncated)
        XCTAssertEqual(packet.descriptors.count, 2, "the caller owns them, to close")
        packet.descriptors.forEach(Kernel.close)
    }

    func testAFullReceiveQueueRefusesTheSendAtOnceAndNothingOfTheRefusedSendArrives() throws {
        let (sender, receiver) = try Kernel.unixPacketPair()
        defer { Kernel.close(sender); Kernel.close(receiver) }
        let ends = try pipe()
        defer { Kernel.close(ends.read); Kernel.close(ends.write) }
        var accepted = 0
        while try send(sender, "packet", [ends.read]) {
            accepted += 1
            XCTAssertLessThan(accepted, 1_000_000, "the queue never filled")
        }
        var received = 0
        while let (_, packet) = try receive(receiver) {
            XCTAssertEqual(packet.descriptors.count, 1)
            packet.descriptors.forEach(Kernel.close)
            received += 1
        }
        XCTAssertEqual(received, accepted)
        XCTAssertGreaterThan(accepted, 0)
    }

    func testAPathTooLongForAUnixAddressIsATypedErrorNamingTheCall() throws {
        let listener = try Kernel.unixPacketSocket()
        defer { Kernel.close(listener) }
        let path = "/tmp/" + String(repeating: "x", count: 200)
        XCTAssertThrowsError(try Kernel.listen(listener, atUnixPath: path, backlog: 1)) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(call: "bind(\(path))", errno: ENAMETOOLONG))
        }
        XCTAssertThrowsError(try Kernel.connect(listener, toUnixPath: path)) { error in
            XCTAssertEqual((error as? SystemCallError)?.errno, ENAMETOOLONG)
        }
    }
}
