import CZeroMQ

/// The readiness of a ZeroMQ socket: the `ZMQ_EVENTS` option and `zmq_poll`'s events.
@usableFromInline package struct ZMQEvents: OptionSet, Hashable, Sendable {
    @usableFromInline package let rawValue: Int32

    @inlinable package init(rawValue: Int32) { self.rawValue = rawValue }

    /// `ZMQ_POLLIN`: at least one whole message can be received without blocking.
    @inlinable package static var pollIn: ZMQEvents { ZMQEvents(rawValue: Int32(ZMQ_POLLIN)) }
    /// `ZMQ_POLLOUT`: at least one message can be sent without blocking.
    @inlinable package static var pollOut: ZMQEvents { ZMQEvents(rawValue: Int32(ZMQ_POLLOUT)) }
}
