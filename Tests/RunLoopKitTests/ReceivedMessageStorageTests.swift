@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// The buffers a port keeps from one delivered message for the next
/// (`ReceivedMessageStorage`): reused only when the handler kept none of them.
final class ReceivedMessageStorageTests: XCTestCase {
    /// `components` as a port receives them: `text`'s bytes, where libzmq would lend them.
    private func received(_ text: String, into storage: inout ReceivedMessageStorage) -> [LoopMessage.Component] {
        Array(text.utf8).withUnsafeBytes { storage.oneDataComponent($0) }
    }

    private func bytes(_ components: [LoopMessage.Component]) -> [UInt8] {
        guard components.count == 1, case .data(let bytes) = components[0] else { return [] }
        return bytes
    }

    private func addresses(_ components: [LoopMessage.Component]) -> (components: UnsafeRawPointer?, bytes: UnsafeRawPointer?) {
        (components.withUnsafeBytes { $0.baseAddress }, bytes(components).withUnsafeBytes { $0.baseAddress })
    }

    /// `second`, received after `first` whose handler kept nothing, lands in `first`'s
    /// component array and bytes, holding its own bytes.
    private func assertWrittenIntoTheBuffersOfTheMessageBefore(_ first: String, then second: String,
                                                               file: StaticString = #filePath, line: UInt = #line) {
        var storage = ReceivedMessageStorage()
        var delivered = received(first, into: &storage)
        let firstAddresses = addresses(delivered)
        storage.recycle(&delivered)
        XCTAssertTrue(delivered.isEmpty, file: file, line: line)
        let next = received(second, into: &storage)
        XCTAssertEqual(bytes(next), Array(second.utf8), file: file, line: line)
        XCTAssertEqual(addresses(next).components, firstAddresses.components, "the same component array", file: file, line: line)
        XCTAssertEqual(addresses(next).bytes, firstAddresses.bytes, "the same bytes", file: file, line: line)
    }

    /// A handler keeps only the bytes of `first` (`message.data[0]`); `second` reuses the
    /// component array, which was the port's alone, and never writes into the kept bytes.
    private func assertKeptBytesAreNeverWrittenOver(_ first: String, then second: String,
                                                    file: StaticString = #filePath, line: UInt = #line) {
        var storage = ReceivedMessageStorage()
        var delivered = received(first, into: &storage)
        let keptBytes = bytes(delivered)
        let firstAddresses = addresses(delivered)
        storage.recycle(&delivered)
        let next = received(second, into: &storage)
        XCTAssertEqual(keptBytes, Array(first.utf8), file: file, line: line)
        XCTAssertEqual(bytes(next), Array(second.utf8), file: file, line: line)
        XCTAssertEqual(addresses(next).components, firstAddresses.components, "the component array was the port's alone",
                       file: file, line: line)
        XCTAssertNotEqual(addresses(next).bytes, keptBytes.withUnsafeBytes { $0.baseAddress }, file: file, line: line)
    }

    func testTheNextMessageIsWrittenIntoTheBuffersOfOneItsHandlerKeptNothingOf() {
        assertWrittenIntoTheBuffersOfTheMessageBefore("first message", then: "second")
    }

    func testAMessageOfTheLastOnesSizeIsWrittenOverItsBytes() {
        assertWrittenIntoTheBuffersOfTheMessageBefore("sixteen bytes ab", then: "sixteen bytes cd")
    }

    func testAMessageTheHandlerKeptIsNeverWrittenOver() {
        var storage = ReceivedMessageStorage()
        var first = received("kept whole", into: &storage)
        let kept = first // as a handler that appends each message to a list
        storage.recycle(&first)
        let second = received("second message", into: &storage)
        XCTAssertEqual(bytes(kept), Array("kept whole".utf8))
        XCTAssertEqual(bytes(second), Array("second message".utf8))
        XCTAssertNotEqual(addresses(second).components, addresses(kept).components)
        XCTAssertNotEqual(addresses(second).bytes, addresses(kept).bytes)
    }

    func testBytesTheHandlerKeptAreNeverWrittenOverThoughTheArrayIsReused() {
        assertKeptBytesAreNeverWrittenOver("kept bytes", then: "next one!")
    }

    func testBytesTheHandlerKeptAreNotWrittenOverByAMessageOfTheirSize() {
        assertKeptBytesAreNeverWrittenOver("kept, 14 bytes", then: "next, 14 bytes")
    }

    func testAMessageLargerThanTheKeptBytesGetsBuffersOfItsOwn() {
        var storage = ReceivedMessageStorage()
        var first = received("short", into: &storage)
        let firstAddresses = addresses(first)
        storage.recycle(&first)
        let longer = String(repeating: "longer than the kept bytes ", count: 8)
        let second = received(longer, into: &storage)
        XCTAssertEqual(bytes(second), Array(longer.utf8))
        XCTAssertEqual(addresses(second).components, firstAddresses.components, "the component array is reused")
        let third = received("after it", into: &storage)
        XCTAssertEqual(bytes(third), Array("after it".utf8))
        XCTAssertEqual(bytes(second), Array(longer.utf8), "what a handler kept stays as it was")
    }

    func testBytesOverTheLimitAreNotKeptForTheNextMessage() {
        var storage = ReceivedMessageStorage()
        var large = [UInt8](repeating: 1, count: ReceivedMessageStorage.largestKeptData + 1).withUnsafeBytes {
            storage.oneDataComponent($0)
        }
        XCTAssertGreaterThan(bytes(large).capacity, ReceivedMessageStorage.largestKeptData)
        storage.recycle(&large)
        XCTAssertEqual(large.count, 1, "left to be freed with its message")
        let next = received("small", into: &storage)
        XCTAssertLessThanOrEqual(bytes(next).capacity, ReceivedMessageStorage.largestKeptData)
    }

    func testMessagesOfOtherShapesAreLeftAlone() {
        var storage = ReceivedMessageStorage()
        var two: [LoopMessage.Component] = [.data([1]), .data([2])]
        storage.recycle(&two)
        XCTAssertEqual(two, [.data([1]), .data([2])])
        let other = try! LocalPort { _ in nil }
        defer { other.invalidate() }
        var port: [LoopMessage.Component] = [.port(other.remote)]
        storage.recycle(&port)
        XCTAssertEqual(port, [.port(other.remote)])
    }

    func testAPortWhoseHandlerKeepsEveryMessageDeliversEachIntact() throws {
        var kept: [LoopMessage] = []
        var handled = 0
        let port = try LocalPort { message in
            handled += 1
            if message.id % 2 == 0 { kept.append(message) } // every other message is kept
            return nil
        }
        ThreadRunLoop.current.add(port, to: .default)
        defer { port.invalidate() }
        let remote = port.remote
        let sender = TestThread {
            for id in 0..<Int32(200) {
                let text = String(repeating: "message \(id) ", count: Int(id % 7) + 1)
                do { try remote.send(LoopMessage(id: id, text: text)) } catch { XCTFail("\(error)") }
            }
        }
        XCTAssertTrue(runCurrentLoop { handled == 200 })
        sender.join()
        XCTAssertEqual(kept.map(\.id), Array(stride(from: 0, to: 200, by: 2)))
        for message in kept {
            XCTAssertEqual(message.text, String(repeating: "message \(message.id) ", count: Int(message.id % 7) + 1))
        }
    }
}
