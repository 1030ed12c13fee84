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

    func testTheNextMessageIsWrittenIntoTheBuffersOfOneItsHandlerKeptNothingOf() {
        var storage = ReceivedMessageStorage()
        var first = received("first message", into: &storage)
        let firstAddresses = addresses(first)
        storage.recycle(&first)
        XCTAssertTrue(first.isEmpty)
        let second = received("second", into: &storage)
        XCTAssertEqual(bytes(second), Array("second".utf8))
        XCTAssertEqual(addresses(second).components, firstAddresses.components, "the same component array")
        XCTAssertEqual(addresses(second).bytes, firstAddresses.bytes, "the same bytes")
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
        var storage = ReceivedMessageStorage()
        var first = received("kept bytes", into: &storage)
        let keptBytes = bytes(first) // the handler keeps `message.data[0]` only
        let firstAddresses = addresses(first)
        storage.recycle(&first)
        let second = received("next one!", into: &storage)
        XCTAssertEqual(keptBytes, Array("kept bytes".utf8))
        XCTAssertEqual(bytes(second), Array("next one!".utf8))
        XCTAssertEqual(addresses(second).components, firstAddresses.components, "the component array was the port's alone")
        XCTAssertNotEqual(addresses(second).bytes, keptBytes.withUnsafeBytes { $0.baseAddress })
    }

    func testAMessageOfTheLastOnesSizeIsWrittenOverItsBytes() {
        var storage = ReceivedMessageStorage()
        var first = received("sixteen bytes ab", into: &storage)
        let firstAddresses = addresses(first)
        storage.recycle(&first)
        let second = received("sixteen bytes cd", into: &storage)
        XCTAssertEqual(bytes(second), Array("sixteen bytes cd".utf8))
        XCTAssertEqual(addresses(second).components, firstAddresses.components, "the same component array")
        XCTAssertEqual(addresses(second).bytes, firstAddresses.bytes, "the same bytes, written over")
    }

    func testBytesTheHandlerKeptAreNotWrittenOverByAMessageOfTheirSize() {
        var storage = ReceivedMessageStorage()
        var first = received("kept: 12 bytes", into: &storage)
        let keptBytes = bytes(first) // the handler keeps `message.data[0]` only
        storage.recycle(&first)
        let second = received("next 14 bytes!", into: &storage)
        XCTAssertEqual(keptBytes, Array("kept: 12 bytes".utf8))
        XCTAssertEqual(bytes(second), Array("next 14 bytes!".utf8))
        XCTAssertNotEqual(addresses(second).bytes, keptBytes.withUnsafeBytes { $0.baseAddress })
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
