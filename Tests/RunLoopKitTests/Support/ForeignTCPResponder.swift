import Dispatch
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopWire
import RunLoopZMQ
import XCTest

/// A bare ZeroMQ peer on a thread of its own that answers one request over tcp, speaking
/// the wire format as a foreign server would (`docs/wire-format.md`): a ROUTER socket that
/// sends the reply back with the request's routing id. No RunLoopKit port of this process
/// is behind its address, so the reply cannot take an in-process shortcut.
final class ForeignTCPResponder: @unchecked Sendable {
    /// Where it listens (`tcp://127.0.0.1:N`).
    let address: PortAddress
    private let seenRequest = LockedValue<WireMessage?>(nil)
    private let thread: TestThread
    private let answered = DispatchSemaphore(value: 0)

    /// Listens, and once `init` returns, answers the first request with `answer` as its data.
    init(answer: String) throws {
        let endpoint = LockedValue<String?>(nil)
        let listening = DispatchSemaphore(value: 0)
        let seen = seenRequest
        let answered = answered
        thread = TestThread {
            do {
                let router = try ZMQSocket(type: .router)
                try router.setOption(.receiveTimeout, 10_000)
                try router.bind("tcp://127.0.0.1:*")
                endpoint.withLock { $0 = try? router.lastEndpoint }
                listening.signal()
                let frames = try router.receive(dontWait: false) ?? []
                let request = try WireCodec.decode(Array(frames.dropFirst()))
                seen.withLock { $0 = request }
                let reply = WireMessage(kind: .reply, messageID: request.messageID, correlationID: request.correlationID,
                                        components: [.data(Array(answer.utf8))])
                _ = try router.send([frames[0]] + WireCodec.encode(reply), dontWait: false)
                // Stays connected until the reply was read: a connecting socket (the
                // requester's DEALER) drops what it has not read when its peer hangs up.
                _ = answered.wait(timeout: .now() + 20)
            } catch {
                XCTFail("the tcp peer failed: \(error)")
                listening.signal()
            }
        }
        waitOrFail(listening, "the tcp peer to listen")
        address = try PortAddress(validating: XCTUnwrap(endpoint.withLock { $0 }))
    }

    /// The request it answered, once its reply was read: it then hangs up.
    func requestSeen() -> WireMessage? {
        answered.signal()
        thread.join()
        return seenRequest.withLock { $0 }
    }
}
