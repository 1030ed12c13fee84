import CZeroMQ

/// The readiness of a ZeroMQ socket: the `ZMQ_EVENTS` option and `zmq_poll`'s events.
package struct ZMQEvents: OptionSet, Hashable, Sendable {
    package let rawValue: Int32

    package init(rawValue: Int32) { self.rawValue = rawValue }

    /// `ZMQ_POLLIN`: at least one whole message can be received without blocking.
    package static let pollIn = ZMQEvents(rawValue: Int32(ZMQ_POLLIN))
    /// `ZMQ_POLLOUT`: at least one message can be sent without blocking.
    package static let pollOut = ZMQEvents(rawValue: Int32(ZMQ_POLLOUT))
}
