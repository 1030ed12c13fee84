import RunLoopCore
import RunLoopWire
import RunLoopZMQ

/// The receive path every port source shares, a port's ROUTER socket and a requester's
/// connection alike: one non-blocking receive whose frames are lent where libzmq put them,
/// given back as soon as `decode` returns (before any handler of an owned message runs, so
/// that a nested run can receive again), and a failed receive or a message the decoder
/// rejected dropped with its reason (`drop`: counted and logged). Loop thread only.
protocol WireReceiver: AnyObject {
    /// Drops a message for `reason`: counted and logged at `.debug`.
    func drop(_ reason: MessageDropReason, _ detail: @autoclosure () -> String)
}

extension WireReceiver {
    /// Receives one message from `socket` without blocking, hands its frames to `decode`,
    /// gives them back, and hands what `decode` made to `deliver`, whose result is the
    /// delivery's. The decoded value goes straight to `deliver`, not returned in an enum
    /// (hot-path: no-witness-copies (docs/optimization-tips.md)).
    @inline(__always)
    func receiveOne<Value>(from socket: ZMQSocket,
                           decode: (UnsafeBufferPointer<UnsafeRawBufferPointer>) throws(WireFormatError) -> Value,
                           deliver: (Value) -> PortDelivery) -> PortDelivery {
        let frames: UnsafeBufferPointer<UnsafeRawBufferPointer>
        do {
            guard let received = try socket.receiveInPlace(dontWait: true) else { return .empty }
            frames = received
        } catch {
            drop(.receiveFailed, "\(error)")
            return .dropped
        }
        let value: Value
        do {
            value = try decode(frames)
        } catch {
            socket.releaseReceived()
            drop(PortEnvelope.dropReason(rejecting: error), "\(error)")
            return .dropped
        }
        socket.releaseReceived()
        return deliver(value)
    }
}
