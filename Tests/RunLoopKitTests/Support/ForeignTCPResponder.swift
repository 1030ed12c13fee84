import Dispatch
@testable import RunLoopKit
import XCTest

/// A bare ZeroMQ peer on a thread of its own that answers one request over tcp, speaking
/// the wire format, as a peer on another machine would: no RunLoopKit port of this process
/// is behind its address, so the reply cannot take an in-process shortcut.
final class ForeignTCPResponder: @unchecked Sendable {
    /// Where it listens (`tcp://127.0.0.1:N`).
    let address: PortAddress
    private let seenReplyAddress = LockedValue<String?>(nil)
    private let thread: TestThread

    /// Listens, and once `init` returns, answers the first request with `answer` as its data.
    init(answer: String) throws {
        let endpoint = LockedValue<String?>(nil)
        let listening = DispatchSemaphore(value: 0)
        let seen = seenReplyAddress
        thread = TestThread {
            do {
                let pull = try ZMQSocket(type: .pull)
                try pull.setOption(.receiveTimeout, 10_000)
                try pull.bind("tcp://127.0.0.1:*")
                endpoint.withLock { $0 = try? pull.lastEndpoint }
                listening.signal()
                let request = try WireCodec.decode(try pull.receive(dontWait: false) ?? [])
                seen.withLock { $0 = request.replyAddress }
                let push = try ZMQSocket(type: .push)
                try push.connect(request.replyAddress ?? "")
                let reply = WireMessage(kind: .reply, messageID: request.messageID, correlationID: request.correlationID,
                                        components: [.data(Array(answer.utf8))])
                _ = try push.send(WireCodec.encode(reply), dontWait: false)
            } catch {
                XCTFail("the tcp peer failed: \(error)")
                listening.signal()
            }
        }
        waitOrFail(listening, "the tcp peer to listen")
        address = try PortAddress(validating: XCTUnwrap(endpoint.withLock { $0 }))
    }

    /// The reply address its request carried, once it has answered.
    func replyAddressSeen() -> String? {
        thread.join()
        return seenReplyAddress.withLock { $0 }
    }
}
