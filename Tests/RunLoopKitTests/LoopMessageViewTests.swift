import Dispatch
import Foundation
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopWire
import RunLoopZMQ
import XCTest

/// A port's borrowing handler: the message read where libzmq received it, lent for the
/// call (`PortHandler.borrowing`, `LoopMessageView`).
final class LoopMessageViewTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    func testABorrowingHandlerReadsTheIdDataPortsAndReplyPortWhereTheyArrived() throws {
        let other = try LocalPort { _ in nil }
        var seen: [String] = []
        let port = try LocalPort()
        port.handler = .borrowing { view in
            XCTAssertFalse(view.isRequest)
            XCTAssertEqual(view.componentCount, 3)
            XCTAssertEqual(view.data(at: 0).map { String(decoding: $0, as: UTF8.self) }, "first")
            XCTAssertNil(view.data(at: 1), "component 1 is a port")
            XCTAssertEqual(view.port(at: 1), other.remote)
            XCTAssertEqual(view.data(at: 2).map { [UInt8]($0) }, [0, 1, 2, 255])
            XCTAssertEqual(view.firstData.map { String(decoding: $0, as: UTF8.self) }, "first")
            XCTAssertEqual(view.replyPort, other.remote)
            seen.append("\(view.id)")
            XCTAssertEqual(view.owned, LoopMessage(id: 5, components: [.data(Array("first".utf8)), .port(other.remote), .data([0, 1, 2, 255])],
                                                   replyPort: other.remote))
            return nil
        }
        loop.add(port, to: .default)
        let message = LoopMessage(id: 5, components: [.data(Array("first".utf8)), .port(other.remote), .data([0, 1, 2, 255])],
                                  replyPort: other.remote)
        TestThread { do { try port.send(message) } catch { XCTFail("\(error)") } }.join()
        XCTAssertTrue(runCurrentLoop { seen == ["5"] })
        XCTAssertEqual(port.statistics.messagesReceived, 1)
        port.invalidate()
        other.invalidate()
    }

    func testABorrowingHandlerMayInvalidateItsOwnPortAndStillReadTheMessageItWasLent() throws {
        // Long enough for a frame of the sender's pool, not one libzmq keeps inside its message.
        let text = String(repeating: "lent until the handler returns; ", count: 8)
        var read: [String] = []
        let port = try LocalPort()
        port.handler = .borrowing { [unowned port] view in
            port.invalidate() // closes the socket now, while the message's frames are lent
            read.append(view.firstData.map { String(decoding: $0, as: UTF8.self) } ?? "none")
            return nil
        }
        loop.add(port, to: .default)
        TestThread { do { try port.send(LoopMessage(id: 3, text: text)) } catch { XCTFail("\(error)") } }.join()
        XCTAssertTrue(runCurrentLoop { !read.isEmpty })
        XCTAssertEqual(read, [text])
        XCTAssertFalse(port.isValid)
        XCTAssertFalse(port.socket.isOpen)
    }

    func testABorrowingHandlersReturnValueIsTheReplyAndItsErrorTheFailure() throws {
        struct Refused: Error, CustomStringConvertible { var description: String { "refused" } }
        var handled = 0
        let port = try LocalPort()
        port.handler = .borrowing { view in
            handled += 1
            guard view.isRequest else { return nil }
            guard let data = view.firstData, data.first != UInt8(ascii: "x") else { throw Refused() }
            return LoopMessage(id: 0, components: [.data(Array("echo:".utf8) + [UInt8](data))])
        }
        loop.add(port, to: .default)
        let results = LockedValue<[String]>([])
        let requester = TestThread {
            for text in ["ping", "xyz"] {
                do {
                    let reply = try port.remote.sendRequest(LoopMessage(id: 9, text: text), receiveTimeout: .seconds(60))
                    results.withLock { $0.append("\(reply.id) \(reply.text ?? "?")") }
                } catch {
                    results.withLock { $0.append("\(error)") }
                }
            }
        }
        XCTAssertTrue(runCurrentLoop { handled == 2 })
        requester.join()
        XCTAssertEqual(results.withLock { $0 }, ["9 echo:ping", "\(PortError.remoteHandlerFailed(port.remote.address, reason: "refused"))"])
        XCTAssertEqual(port.statistics.handlerErrors, 1)
        port.invalidate()
    }

    func testWhatABorrowingHandlerAnswersToAOneWayMessageGoesNowhere() throws {
        var handled: [Int32] = []
        let port = try LocalPort()
        port.handler = .borrowing { view in
            handled.append(view.id)
            return view.id.isMultiple(of: 2) ? LoopMessage(id: 0, text: "nobody waits for this") : nil
        }
        loop.add(port, to: .default)
        for id: Int32 in 1...4 { try port.send(LoopMessage(id: id, text: "one way")) }
        XCTAssertTrue(runCurrentLoop { handled == [1, 2, 3, 4] })
        XCTAssertEqual(port.statistics.messagesReceived, 4)
        XCTAssertEqual(port.statistics.messagesDropped, 0, "an answer nobody asked for is let go, not dropped as a message")
        XCTAssertEqual(port.statistics.repliesFailed, 0, "nor sent")
        port.invalidate()
    }

    /// A request whose borrowing handler runs the loop, which answers another request of
    /// the same port meanwhile: each requester gets its own reply.
    func testARequestAnsweredInsideAnotherRequestsHandlerLeavesEachItsOwnReply() throws {
        var handled: [String] = []
        let port = try LocalPort()
        let innerRequester = LockedValue<TestThread?>(nil)
        let replies = LockedValue<[String]>([])
        let remote = port.remote
        @Sendable func request(_ text: String) {
            do {
                let reply = try remote.sendRequest(LoopMessage(id: 7, text: text), receiveTimeout: .seconds(60))
                replies.withLock { $0.append(reply.text ?? "?") }
            } catch {
                replies.withLock { $0.append("\(error)") }
            }
        }
        port.handler = .borrowing { view in
            let text = String(decoding: view.firstData!, as: UTF8.self)
            if text == "outer" {
                innerRequester.withLock { $0 = TestThread { request("inner") } }
                XCTAssertTrue(runCurrentLoop { handled == ["inner"] }, "the nested run handled the inner request")
            }
            handled.append(text)
            return LoopMessage(id: 0, text: "reply to \(text)")
        }
        loop.add(port, to: .default)
        let outerRequester = TestThread { request("outer") }
        XCTAssertTrue(runCurrentLoop { handled.count == 2 })
        outerRequester.join() // each returns with its reply
        innerRequester.withLock { $0 }?.join()
        XCTAssertEqual(handled, ["inner", "outer"])
        XCTAssertEqual(replies.withLock { $0 }.sorted(), ["reply to inner", "reply to outer"])
        port.invalidate()
    }

    /// The lent frames stay where they are while the handler runs the loop and the same
    /// port delivers another message meanwhile (received into slots of its own).
    func testAViewStaysIntactWhileItsHandlerRunsTheLoopAndTheSamePortDeliversAgain() throws {
        var log: [String] = []
        let port = try LocalPort()
        port.handler = .borrowing { view in
            let text = String(decoding: view.firstData!, as: UTF8.self)
            log.append("begin \(text)")
            if view.id == 1 {
                let sender = TestThread { // arrives while this handler runs
                    do { try port.send(LoopMessage(id: 2, text: "inner")) } catch { XCTFail("\(error)") }
                }
                XCTAssertTrue(runCurrentLoop { log.contains("end inner") }, "the nested run delivers the next message")
                sender.join()
                XCTAssertEqual(String(decoding: view.firstData!, as: UTF8.self), "outer-message-with-a-long-payload",
                               "the outer message's bytes are still its own")
            }
            log.append("end \(text)")
            return nil
        }
        loop.add(port, to: .default)
        TestThread {
            do { try port.send(LoopMessage(id: 1, text: "outer-message-with-a-long-payload")) } catch { XCTFail("\(error)") }
        }.join()
        XCTAssertTrue(runCurrentLoop { log.count == 4 })
        XCTAssertEqual(log, ["begin outer-message-with-a-long-payload", "begin inner", "end inner",
                             "end outer-message-with-a-long-payload"])
        port.invalidate()
    }

    func testMalformedMessagesNeverReachABorrowingHandlerAndAreCounted() throws {
        var delivered: [Int32] = []
        let port = try LocalPort()
        port.handler = .borrowing { view in delivered.append(view.id); return nil }
        loop.add(port, to: .default)
        let raw = try ZMQSocket(type: .dealer)
        try raw.connect(port.inProcessAddress.rawValue)
        let valid = WireCodec.encode(LoopMessage(id: 42).wire(kind: .message))
        let badPort = WireCodec.encode(WireMessage(messageID: 1, components: [.port(address: "file:///etc/passwd")]))
        var badUTF8Port = WireCodec.encode(WireMessage(messageID: 1, components: [.port(address: "inproc://xx")]))
        badUTF8Port[0].replaceSubrange(badUTF8Port[0].count - 2..<badUTF8Port[0].count, with: [0xC3, 0x28]) // the address's last two bytes
        let badReplyPort = WireCodec.encode(WireMessage(messageID: 1, replyAddress: "tcp://"))
        let reply = WireCodec.encode(WireMessage(kind: .reply, messageID: 1, correlationID: 7))
        for frames in [[[1, 2, 3]], badPort, badUTF8Port, badReplyPort, reply] {
            XCTAssertTrue(try raw.send(frames, dontWait: false))
        }
        XCTAssertTrue(try raw.send(valid, dontWait: false))
        XCTAssertTrue(runCurrentLoop { delivered == [42] })
        XCTAssertEqual(port.statistics.messagesDropped, 5)
        XCTAssertEqual(port.statistics.messagesReceived, 1)
        port.invalidate()
    }
}
