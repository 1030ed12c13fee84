import CZeroMQ

/// A ZeroMQ socket type, the `type` argument of `zmq_socket`.
package struct ZMQSocketType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    package let rawValue: Int32

    package init(rawValue: Int32) { self.rawValue = rawValue }

    /// `ZMQ_PAIR`: exclusive one-to-one connection.
    package static let pair = ZMQSocketType(rawValue: ZMQ_PAIR)
    /// `ZMQ_PUSH`: sends, round-robin to connected PULL sockets.
    package static let push = ZMQSocketType(rawValue: ZMQ_PUSH)
    /// `ZMQ_PULL`: receives, fair-queued from connected PUSH sockets.
    package static let pull = ZMQSocketType(rawValue: ZMQ_PULL)
    /// `ZMQ_DEALER`: asynchronous request/reply client.
    package static let dealer = ZMQSocketType(rawValue: ZMQ_DEALER)
    /// `ZMQ_ROUTER`: asynchronous request/reply server, addressing peers by routing id.
    package static let router = ZMQSocketType(rawValue: ZMQ_ROUTER)
    /// `ZMQ_REQ`: strict send-then-receive client.
    package static let req = ZMQSocketType(rawValue: ZMQ_REQ)
    /// `ZMQ_REP`: strict receive-then-send server.
    package static let rep = ZMQSocketType(rawValue: ZMQ_REP)
    /// `ZMQ_PUB`: publishes to subscribers, dropping when they are slow.
    package static let pub = ZMQSocketType(rawValue: ZMQ_PUB)
    /// `ZMQ_SUB`: subscribes to publishers.
    package static let sub = ZMQSocketType(rawValue: ZMQ_SUB)

    package var description: String {
        switch self {
        case .pair: "PAIR"
        case .push: "PUSH"
        case .pull: "PULL"
        case .dealer: "DEALER"
        case .router: "ROUTER"
        case .req: "REQ"
        case .rep: "REP"
        case .pub: "PUB"
        case .sub: "SUB"
        default: "ZMQSocketType(\(rawValue))"
        }
    }
}
