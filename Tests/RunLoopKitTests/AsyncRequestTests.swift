import Dispatch
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopWire
import XCTest

/// `RemotePort.request`: request/reply from async code, through the per-process requester.
final class AsyncRequestTests: XCTestCase {
    /// A thread serving a port whose handler is `handler`.
    private func server(_ handler: @escaping @Sendable (LoopMessage) -> LoopMessage?) -> (LoopThread, RemotePort) {
        let remote = SharedValue<RemotePort?>(nil)
        let thread = LoopThread { loop in
            let port = try! LocalPort { handler($0) }
            loop.add(port, to: .default)
            remote.withLock { $0 = port.remote }
        }
        return (thread, remote.withLock { $0! })
    }

    private var requester: AsyncRequester { get throws { try AsyncRequester.shared.get() } }

    func testARequestReturnsTheRemoteHandlersReply() async throws {
        let (thread, remote) = server { LoopMessage(id: 0, text: ($0.text ?? "").uppercased()) }
        let reply = try await remote.request(LoopMessage(id: 7, text: "ping"))
        XCTAssertEqual(reply.text, "PING")
        XCTAssertEqual(reply.id, 7, "a reply carries its request's id")
        thread.stop()
    }

    func testAnAsyncRequestToAForeignServerOverTCPGetsItsReplyOverTheRequestsOwnConnection() async throws {
        let peer = try ForeignTCPResponder(answer: "pong")
        let reply = try await RemotePort(peer.address).request(LoopMessage(id: 9, text: "ping"),
                                                               sendTimeout: .seconds(10), receiveTimeout: .seconds(10))
        XCTAssertEqual(reply.id, 9)
        XCTAssertEqual(reply.text, "pong")
        let request = try XCTUnwrap(peer.requestSeen())
        XCTAssertEqual(request.kind, .request)
        XCTAssertNil(request.replyAddress, "the requester binds nothing: the server can answer a requester it cannot reach")
    }

    func testConcurrentRequestsEachGetTheirOwnReply() async throws {
        let (thread, remote) = server { LoopMessage(id: 0, text: "\(($0.text.flatMap(Int.init) ?? -1) * 2)") }
        let replies = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            for index in 0..<200 {
                group.addTask { (index, try await remote.request(LoopMessage(id: 1, text: "\(index)")).text) }
            }
            return try await group.reduce(into: [Int: String?]()) { $0[$1.0] = $1.1 }
        }
        XCTAssertEqual(replies.count, 200)
        for (index, text) in replies { XCTAssertEqual(text, "\(index * 2)") }
        XCTAssertEqual(try requester.waitingCount, 0)
        thread.stop()
    }

    func testARequestNobodyAnswersTimesOutOnReceive() async throws {
        let kept = SharedValue<LocalPort?>(nil)
        // The port is in no mode of its loop: it takes requests and never handles them.
        let thread = LoopThread { _ in kept.withLock { $0 = try! LocalPort { _ in nil } } }
        let target = kept.withLock { $0!.remote }
        do {
            _ = try await target.request(LoopMessage(id: 1), receiveTimeout: .milliseconds(50))
            XCTFail("a request nobody answers got a reply")
        } catch {
            XCTAssertEqual(error as? PortError, .receiveTimedOut(target.address))
        }
        XCTAssertEqual(try requester.waitingCount, 0)
        thread.stop()
    }

    func testARequestToAnInvalidatedPortFailsAsRemoteInvalid() async throws {
        let port = try LocalPort { _ in nil }
        let remote = port.remote
        port.invalidate()
        do {
            _ = try await remote.request(LoopMessage(id: 1))
            XCTFail("a request to a closed port got a reply")
        } catch {
            XCTAssertEqual(error as? PortError, .remoteInvalid(remote.address))
        }
        XCTAssertEqual(try requester.waitingCount, 0)
    }

    func testCancellingAWaitingRequestThrowsCancellationErrorAtOnceAndTheConnectionServesTheNext() async throws {
        let (entered, gate) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let (thread, remote) = server { message in
            if message.id == 1 { entered.signal(); gate.wait() } // holds the first reply back
            return LoopMessage(id: 0, text: "reply \(message.id)")
        }
        let droppedBefore = try requester.lateReplies
        let first = Task { try await remote.request(LoopMessage(id: 1)) }
        waitOrFail(entered, "the server to take the request")
        first.cancel()
        let result = await first.result // while the server still holds the reply back
        XCTAssertThrowsError(try result.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        gate.signal()
        // The server replies to the first (dropped as late), then to the second, in order.
        let second = try await remote.request(LoopMessage(id: 2))
        XCTAssertEqual(second.text, "reply 2")
        XCTAssertEqual(try requester.lateReplies, droppedBefore + 1, "the late reply")
        XCTAssertEqual(try requester.waitingCount, 0)
        thread.stop()
    }

    func testARequestCancelledBeforeItsTurnIsNeverSent() async throws {
        let received = EventLog()
        let (thread, remote) = server { message in
            received.append("\(message.id)")
            return nil
        }
        let (entered, gate) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        try requester.worker.perform { entered.signal(); gate.wait() }
        waitOrFail(entered, "the requester to be busy")
        let first = Task.immediate { try await remote.request(LoopMessage(id: 1)) }
        first.cancel()
        let result = await first.result // while the requester is still busy
        XCTAssertThrowsError(try result.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        gate.signal()
        _ = try await remote.request(LoopMessage(id: 2))
        XCTAssertEqual(received.all, ["2"])
        thread.stop()
    }
}
