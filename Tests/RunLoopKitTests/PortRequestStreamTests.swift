import Dispatch
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// `LocalPort.requests()`: a port served by a task group, each request with its reply
/// right; and `messages()`, which no longer answers requests with empty replies.
final class PortRequestStreamTests: XCTestCase {
    /// A thread owning a port whose handler is the stream `attach` makes of it.
    private func serve<Stream: Sendable>(_ attach: @escaping @Sendable (LocalPort) -> Stream)
        -> (LoopThread, LocalPort, Stream) {
        let made = SharedValue<(LocalPort, Stream)?>(nil)
        let thread = LoopThread { loop in
            let port = try! LocalPort(handling: nil)
            loop.add(port, to: .default)
            let stream = attach(port) // on the owner thread: installed at once
            made.withLock { $0 = (port, stream) }
        }
        let (port, stream) = made.withLock { $0! }
        return (thread, port, stream)
    }

    func testATaskGroupServesAPortsRequestsAndAnswersFromItsChildTasks() async throws {
        let (thread, port, requests) = serve { $0.requests() }
        let server = Task {
            await withTaskGroup(of: Void.self) { group in
                for await request in requests {
                    group.addTask {
                        guard let right = request.takeRight() else { return }
                        await Task.yield() // answered after the handler returned, from another task
                        right.reply(LoopMessage(id: 0, text: String((request.message.text ?? "").reversed())))
                    }
                }
            }
        }
        let remote = port.remote
        let replies = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            for index in 0..<100 {
                group.addTask { (index, try await remote.request(LoopMessage(id: 1, text: "n\(index)")).text) }
            }
            return try await group.reduce(into: [Int: String?]()) { $0[$1.0] = $1.1 }
        }
        XCTAssertEqual(replies.count, 100)
        for (index, text) in replies { XCTAssertEqual(text, String("n\(index)".reversed())) }
        XCTAssertEqual(port.statistics.rightsOutstanding, 0)
        thread.stop() // the port goes with its thread: the stream ends, and the server with it
        await server.value
    }

    func testARequestTakenFromTheStreamAndLetGoWithItsRightGetsANoReplyAtOnce() async throws {
        let (thread, port, requests) = serve { $0.requests() }
        let server = Task {
            for await request in requests { _ = request.message } // taken, never answered
        }
        let remote = port.remote
        do {
            _ = try await remote.request(LoopMessage(id: 2), receiveTimeout: .seconds(60))
            XCTFail("answered")
        } catch {
            XCTAssertEqual(error as? PortError, .noReply(remote.address))
        }
        thread.stop()
        await server.value
    }

    func testTheRightOfAStreamedRequestIsTakenOnce() async throws {
        let (thread, port, requests) = serve { $0.requests() }
        let takes = SharedValue<[Bool]>([])
        let server = Task {
            for await request in requests {
                let first = request.takeRight()
                let second = request.takeRight()
                takes.withLock { $0 = [first != nil, second != nil] }
                first?.reply(LoopMessage(id: 0))
            }
        }
        _ = try await port.remote.request(LoopMessage(id: 3))
        XCTAssertEqual(takes.withLock { $0 }, [true, false])
        thread.stop()
        await server.value
    }

    func testAOneWayMessageToARequestStreamIsDroppedAsForAPortWithoutAHandler() async throws {
        let (thread, port, requests) = serve { $0.requests() }
        let server = Task { for await request in requests { request.takeRight()?.reply(LoopMessage(id: 0)) } }
        try port.remote.send(LoopMessage(id: 4))
        _ = try await port.remote.request(LoopMessage(id: 5)) // after the message, on the same connection
        XCTAssertEqual(port.statistics.messagesDropped, 1)
        XCTAssertEqual(thread.loop.counters.messagesDropped[.noHandler], 1)
        thread.stop()
        await server.value
    }

    func testAMessageStreamAnswersARequestWithANoReplyNotAnEmptyReply() async throws {
        let (thread, port, messages) = serve { $0.messages() }
        let consumer = Task { for await _ in messages {} }
        let remote = port.remote
        do {
            _ = try await remote.request(LoopMessage(id: 6), receiveTimeout: .seconds(60))
            XCTFail("answered")
        } catch {
            XCTAssertEqual(error as? PortError, .noReply(remote.address))
        }
        thread.stop()
        await consumer.value
    }
}
