import RunLoopSystem
import CZeroMQ
import Glibc

/// A ZAP request (ZeroMQ RFC 27): what libzmq asks of the process's authentication handler
/// when a peer's security handshake reaches a server socket.
package struct ZAPRequest: Sendable {
    /// The server socket's `ZMQ_ZAP_DOMAIN` ("" when none was set).
    package let domain: String
    /// The peer's address as libzmq gives it (an IP address on tcp, "" on ipc).
    package let address: String
    /// The security mechanism: "NULL", "PLAIN" or "CURVE".
    package let mechanism: String
    /// The client's long-term CURVE public key, for the CURVE mechanism.
    package let clientKey: ZMQCurveKey?
}

/// What the handler answers a `ZAPRequest`.
package enum ZAPDecision: Sendable, Equatable {
    /// Status 200: the connection goes on; its messages carry `userID` as their "User-Id".
    case allow(userID: String)
    /// Status 400: the handshake fails; the client's monitor sees
    /// `ZMQ_EVENT_HANDSHAKE_FAILED_AUTH` with value 400.
    case deny(reason: String)
}

/// The process's ZAP handler (RFC 27): a ROUTER socket bound at `inproc://zeromq.zap.01` in
/// the shared context, served by one small thread of its own that waits only on that
/// socket (inproc, never the network).
///
/// Once it is bound, libzmq asks it about every CURVE handshake of every server socket in
/// the context, and waits for the answer, so it must answer every request, at once:
/// requests are routed by `ZMQ_ZAP_DOMAIN` to the policy registered for that domain, and a
/// domain without one is allowed (its user id is the client's key, in Z85). It is started
/// by the first CURVE server and then serves for the rest of the process, like the shared
/// context it lives in (never terminated): a handler that went away would let libzmq admit
/// every client of an allow-listed port.
///
/// Thread safety: `register` and `unregister` from any thread (the policies are under a lock).
package final class ZMQAuthenticator: Sendable {
    /// Where libzmq sends ZAP requests (fixed by RFC 27).
    package static let endpoint = "inproc://zeromq.zap.01"

    package typealias Policy = @Sendable (ZAPRequest) -> ZAPDecision

    /// The policies, by ZAP domain; protected by their lock.
    private let policies = LockedValue<[String: Policy]>([:])
    /// Requests answered so far, and those denied (for tests and introspection).
    private let counts = LockedValue<(answered: Int, denied: Int)>((0, 0))

    /// The started handler; protected by its lock, which also serializes the start.
    private static let started = LockedValue<ZMQAuthenticator?>(nil)

    private init() {}

    /// The process's handler, started (its socket bound, on its own thread) by the first call.
    /// Throws if the thread cannot start or the endpoint cannot be bound (another ZAP
    /// handler in this process holds it); a later call tries again.
    package static func shared() throws(SystemCallError) -> ZMQAuthenticator {
        try started.withLock { current throws(SystemCallError) -> ZMQAuthenticator in
            if let current { return current }
            let authenticator = ZMQAuthenticator()
            try authenticator.start()
            current = authenticator
            return authenticator
        }
    }

    /// Routes requests for `domain` to `policy` (replacing any before). Any thread.
    package func register(domain: String, policy: @escaping Policy) {
        policies.withLock { $0[domain] = policy }
    }

    /// Forgets `domain`'s policy. Any thread.
    package func unregister(domain: String) {
        policies.withLock { $0[domain] = nil }
    }

    /// Requests answered since the start, and how many of them were denied.
    package var answered: (all: Int, denied: Int) { counts.withLock { ($0.answered, $0.denied) } }

    /// Starts the thread and waits until its socket is bound (or failed to bind).
    private func start() throws(SystemCallError) {
        let bound = LockedValue<Result<Void, SystemCallError>?>(nil)
        let signal = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
        sem_init(signal, 0, 0)
        defer {
            sem_destroy(signal)
            signal.deallocate()
        }
        let signalAddress = UInt(bitPattern: signal)
        let thread = try NativeThread.start(name: "runloopkit.zap") { [self] in
            let signal = UnsafeMutablePointer<sem_t>(bitPattern: signalAddress)!
            let socket: ZMQSocket
            do throws(SystemCallError) {
                socket = try ZMQSocket(type: .router)
                try socket.bind(ZMQAuthenticator.endpoint)
            } catch {
                bound.withLock { $0 = .failure(error) }
                sem_post(signal)
                return
            }
            bound.withLock { $0 = .success(()) }
            sem_post(signal) // `signal` is not touched after this
            serve(socket)
        }
        thread.detach()
        while sem_wait(signal) != 0 && errno == EINTR {}
        try bound.withLock { $0 }!.get()
    }

    /// Answers requests for the rest of the process (until the context is shut down).
    private func serve(_ socket: ZMQSocket) {
        while true {
            let frames: [[UInt8]]
            do {
                guard let received = try socket.receive(dontWait: false, maxFrames: 16) else { continue }
                frames = received
            } catch where error.code == .terminated {
                return
            } catch {
                continue // a request with too many frames: libzmq never sends one
            }
            guard let reply = answer(frames) else { continue }
            _ = try? socket.send(reply, dontWait: false) // a ROUTER never blocks a send
        }
    }

    /// The reply frames to a request's frames (routing id, delimiter, then RFC 27's
    /// version, request id, domain, address, identity, mechanism, credentials), or nil for
    /// frames that are no ZAP request.
    package func answer(_ frames: [[UInt8]]) -> [[UInt8]]? {
        guard frames.count >= 8, frames[1].isEmpty else { return nil }
        let routingID = frames[0], requestID = frames[3]
        func text(_ index: Int) -> String { String(decoding: frames[index], as: UTF8.self) }
        let decision: ZAPDecision
        if text(2) != "1.0" {
            decision = .deny(reason: "unknown ZAP version")
        } else {
            let mechanism = text(7)
            let clientKey = mechanism == "CURVE" && frames.count >= 9 ? ZMQCurveKey(bytes: frames[8]) : nil
            let request = ZAPRequest(domain: text(4), address: text(5), mechanism: mechanism, clientKey: clientKey)
            if let policy = policies.withLock({ $0[request.domain] }) {
                decision = policy(request)
            } else {
                decision = .allow(userID: clientKey?.z85 ?? "")
            }
        }
        counts.withLock {
            $0.answered += 1
            if case .deny = decision { $0.denied += 1 }
        }
        let status: [UInt8], statusText: [UInt8], userID: [UInt8]
        switch decision {
        case .allow(let user): (status, statusText, userID) = (Array("200".utf8), Array("OK".utf8), Array(user.utf8))
        case .deny(let reason): (status, statusText, userID) = (Array("400".utf8), Array(reason.utf8), [])
        }
        return [routingID, [], Array("1.0".utf8), requestID, status, statusText, userID, []]
    }
}

extension ZMQSocketOption where Value == [UInt8] {
    /// `ZMQ_ZAP_DOMAIN`: the domain this server socket's ZAP requests carry, which the
    /// process's ZAP handler routes them by; set before binding.
    package static var zapDomain: Self { Self(name: ZMQ_ZAP_DOMAIN) }
}

extension ZMQSocket {
    /// The metadata property `name` of the `index`th frame `receiveInPlace` lent (for
    /// example "User-Id", "Peer-Address"), via `zmq_msg_gets`; nil when the frame has none
    /// (always so for inproc). The text is libzmq's, valid until `releaseReceived()`.
    package func receivedProperty(_ name: UnsafePointer<CChar>, ofFrame index: Int) -> UnsafePointer<CChar>? {
        zmq_msg_gets(receivedFrame(index), name)
    }
}

extension ZMQHandshakeFailure {
    /// Whether the server's ZAP handler refused the client (`ZMQ_EVENT_HANDSHAKE_FAILED_AUTH`
    /// with status 400), rather than the handshake itself failing.
    package var isAuthorizationDenied: Bool { event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH && value == 400 }
}
