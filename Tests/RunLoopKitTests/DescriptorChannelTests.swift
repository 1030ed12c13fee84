import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// The descriptor side channel of a named port (`DescriptorSender`, `DescriptorReceiver`):
/// descriptors passed under a token are the receiver's own, taken once by the sending
/// process's token, and every one not taken is closed; counted with `/proc/self/fd`.
final class DescriptorChannelTests: XCTestCase {
    static let scenarioVariable = "RUNLOOPKIT_DESCRIPTOR_CHANNEL_SCENARIO"

    override func setUp() {
        super.setUp()
        guard let scenario = childScenario(Self.scenarioVariable) else { return }
        endChild { Self.runChild(path: scenario) }
    }

    /// In the child: attaches a pipe's read end holding "from the child" under one token,
    /// and another under a second token whose message is never sent, then ends (as a
    /// killed sender would: the kernel closes everything it had).
    private static func runChild(path: String) -> Bool {
        do {
            let sender = try DescriptorSender(path: path)
            var tokens: [DescriptorToken] = []
            for text in ["from the child", "never claimed"] {
                let ends = try pipe()
                _ = try Array(text.utf8).withUnsafeBytes { try Kernel.write(ends.write, $0) }
                tokens.append(try sender.attach([ends.read]))
                Kernel.close(ends.read)
                Kernel.close(ends.write)
            }
            print("TOKENS \(tokens[0]) \(tokens[1]) PID \(getpid())")
            return true
        } catch {
            return childReport(false, "\(error)")
        }
    }

    private static func pipe() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        try systemCall("pipe") { nonBlockingPipe(&ends) }
        return (ends[0], ends[1])
    }

    private func openDescriptors() throws -> Int {
        try Kernel.directoryEntries("/proc/self/fd").count
    }

    private func socketPath() -> String {
        NSTemporaryDirectory() + "descriptors-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).fds"
    }

    private func readAll(_ fd: Int32) throws -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 256)
        while true {
            let count = try buffer.withUnsafeMutableBytes { try Kernel.read(fd, into: $0) }
            if count == 0 { return String(decoding: bytes, as: UTF8.self) }
            bytes += buffer.prefix(count)
        }
    }

    private func token(hex: Substring) throws -> DescriptorToken {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(try XCTUnwrap(UInt8(hex[index..<next], radix: 16)))
            index = next
        }
        return try XCTUnwrap(DescriptorToken(bytes))
    }

    func testAPipePassedUnderATokenIsTakenOnceByItsSenderAndReadsBackThroughTheReceiversDescriptor() throws {
        let before = try openDescriptors()
        do {
            let receiver = try DescriptorReceiver(path: socketPath())
            let sender = try DescriptorSender(path: receiver.path)
            let ends = try Self.pipe()
            let token = try sender.attach([ends.read])
            Kernel.close(ends.read)
            _ = try Array("through the side channel".utf8).withUnsafeBytes { try Kernel.write(ends.write, $0) }
            Kernel.close(ends.write)
            // No drain first: the token is looked for in what is queued when it is missing.
            let descriptors = try XCTUnwrap(receiver.take(token, from: getpid()))
            XCTAssertEqual(descriptors.count, 1)
            XCTAssertEqual(try readAll(try XCTUnwrap(descriptors[0].descriptor)), "through the side channel")
            XCTAssertNil(receiver.take(token, from: getpid()), "taken once")
            XCTAssertEqual(receiver.counters.taken, 1)
            XCTAssertEqual(receiver.counters.unknownTokens, 1)
        }
        XCTAssertEqual(try openDescriptors(), before, "the message's descriptor closed with it; the channel closed")
    }

    func testTenThousandDescriptorsPassedLeaveNoneOpenOnEitherSide() throws {
        let before = try openDescriptors()
        do {
            let receiver = try DescriptorReceiver(path: socketPath())
            let sender = try DescriptorSender(path: receiver.path)
            let ends = try Self.pipe()
            defer { Kernel.close(ends.read); Kernel.close(ends.write) }
            var taken = 0
            for _ in 0..<100 {
                var tokens: [DescriptorToken] = []
                for _ in 0..<100 { tokens.append(try sender.attach([ends.write])) }
                receiver.drain()
                for token in tokens { taken += try XCTUnwrap(receiver.take(token, from: getpid())).count }
            }
            XCTAssertEqual(taken, 10_000)
            XCTAssertEqual(receiver.counters, .init(taken: 10_000))
        }
        XCTAssertEqual(try openDescriptors(), before)
    }

    func testAForgedTokenOrAnotherProcesssClaimTakesNothingIsCountedAndLeavesTheDescriptorsToTheirSender() throws {
        let receiver = try DescriptorReceiver(path: socketPath())
        let sender = try DescriptorSender(path: receiver.path)
        let ends = try Self.pipe()
        defer { Kernel.close(ends.read); Kernel.close(ends.write) }
        let token = try sender.attach([ends.read])
        receiver.drain()
        XCTAssertNil(receiver.take(.random(), from: getpid()), "a token nobody attached")
        XCTAssertNil(receiver.take(token, from: getpid() + 1), "the right token from another process")
        XCTAssertEqual(receiver.counters.unknownTokens, 2)
        XCTAssertEqual(receiver.unclaimedCount, 1, "a wrong claim destroys nothing")
        XCTAssertEqual(try XCTUnwrap(receiver.take(token, from: getpid())).count, 1)
    }

    func testInvalidatingTheReceiverWithDescriptorsWaitingClosesEveryOne() throws {
        let before = try openDescriptors()
        let receiver = try DescriptorReceiver(path: socketPath())
        do {
            let sender = try DescriptorSender(path: receiver.path)
            let ends = try Self.pipe()
            for _ in 0..<50 { _ = try sender.attach([ends.read, ends.write]) }
            Kernel.close(ends.read); Kernel.close(ends.write)
            receiver.drain()
            XCTAssertEqual(receiver.unclaimedCount, 100)
            for _ in 0..<25 { _ = try sender.attach([ends.read]) } // still queued, unread
        } catch {
            XCTFail("\(error)")
        }
        receiver.invalidate()
        XCTAssertEqual(receiver.unclaimedCount, 0)
        XCTAssertEqual(receiver.counters.closedUnclaimed, 100)
        XCTAssertFalse(Kernel.exists(receiver.path))
        XCTAssertEqual(try openDescriptors(), before, "the unread ones went with their connection")
    }

    func testDescriptorsOverAConnectionsBoundAndRevokedOnesAreClosedAndCounted() throws {
        let before = try openDescriptors()
        do {
            let receiver = try DescriptorReceiver(path: socketPath(), maxUnclaimedPerConnection: 4)
            let sender = try DescriptorSender(path: receiver.path)
            let ends = try Self.pipe()
            defer { Kernel.close(ends.read); Kernel.close(ends.write) }
            let kept = try sender.attach([ends.read, ends.read, ends.read])
            let over = try sender.attach([ends.write, ends.write])
            let revoked = try sender.attach([ends.write])
            sender.revoke(revoked)
            receiver.drain()
            XCTAssertEqual(receiver.counters.closedUnclaimed, 3, "two over the bound, one revoked")
            XCTAssertEqual(receiver.counters.overBound, 2)
            XCTAssertNil(receiver.take(over, from: getpid()))
            XCTAssertNil(receiver.take(revoked, from: getpid()))
            XCTAssertEqual(try XCTUnwrap(receiver.take(kept, from: getpid())).count, 3)
        }
        XCTAssertEqual(try openDescriptors(), before)
    }

    func testAnotherProcessPassesAPipeThatReadsBackAndWhatItNeverClaimedIsClosedAfterItDies() throws {
        let before = try openDescriptors()
        do {
            let receiver = try DescriptorReceiver(path: socketPath())
            let report = try expectPassingChild(self, test: #function, variable: Self.scenarioVariable, scenario: receiver.path)
            let line = try XCTUnwrap(report.split(separator: "\n").first { $0.hasPrefix("TOKENS ") })
            let fields = line.split(separator: " ")
            XCTAssertEqual(fields.count, 5, String(line))
            let pid = try XCTUnwrap(Int32(fields[4]))
            let descriptors = try XCTUnwrap(receiver.take(try token(hex: fields[1]), from: pid))
            XCTAssertEqual(try readAll(try XCTUnwrap(descriptors.first?.descriptor)), "from the child",
                           "the descriptor outlived its sender")
            XCTAssertEqual(receiver.unclaimedCount, 1)
            receiver.closeOrphans(before: .now())
            XCTAssertEqual(receiver.unclaimedCount, 0, "its connection closed when it died: the orphan is closed")
            XCTAssertEqual(receiver.counters.closedUnclaimed, 1)
        }
        XCTAssertEqual(try openDescriptors(), before)
    }

    func testADescriptorTakenFromItsOwnerStaysOpenAndOneNotTakenClosesWithItsLastReference() throws {
        // The owner holds the pipe's only write end: the read end sees the end of the pipe
        // (0) once it is closed, and nothing to read yet (EAGAIN) while it is open.
        var ends: [Int32] = [-1, -1]
        try systemCall("pipe") { nonBlockingPipe(&ends) }
        defer { Kernel.close(ends[0]) }
        func writerIsOpen() throws -> Bool {
            var byte: UInt8 = 0
            do {
                return try withUnsafeMutableBytes(of: &byte) { try Kernel.read(ends[0], into: $0) } != 0
            } catch let error as SystemCallError where error.code == .again {
                return true
            }
        }
        let kept: Int32
        do {
            let owned = MessageDescriptor(adopting: try Kernel.duplicate(ends[1]))
            Kernel.close(ends[1])
            kept = try XCTUnwrap(owned.take())
            XCTAssertNil(owned.take(), "taken once")
            XCTAssertNil(owned.descriptor)
        }
        XCTAssertTrue(try writerIsOpen(), "taken: the caller's, open after its owner went")
        do {
            _ = MessageDescriptor(adopting: kept)
        }
        XCTAssertFalse(try writerIsOpen(), "not taken: closed with its owner's last reference")
    }
}
