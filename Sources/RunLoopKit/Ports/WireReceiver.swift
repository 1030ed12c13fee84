import RunLoopCore
import RunLoopWire
import RunLoopZMQ

/// What one receive on a port source came to.
enum Received<Value> {
    /// Nothing waited, after libzmq processed the socket's mailbox: drained.
    case empty
    /// A message was taken but dropped (the receive failed, or the decoder rejected it).
    case dropped
    /// What `decode` made of the message.
    case decoded(Value)
}

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
    /// Receives one message from `socket` without blocking and hands its frames to `decode`.
    @inline(__always)
    func receiveOne<Value>(from socket: ZMQSocket,
                           _ decode: (UnsafeBufferPointer<UnsafeRawBufferPointer>) throws(WireFormatError) -> Value)
        -> Received<Value> {
        let frames: UnsafeBufferPointer<UnsafeRawBufferPointer>
        do {
            guard let received = try socket.receiveInPlace(dontWait: true) else { return .empty }
            frames = received
        } catch {
            drop(.receiveFailed, "\(error)")
            return .dropped
        }
        defer { socket.releaseReceived() }
        do {
            return .decoded(try decode(frames))
        } catch {
            drop(PortEnvelope.dropReason(rejecting: error), "\(error)")
            return .dropped
        }
    }
}
