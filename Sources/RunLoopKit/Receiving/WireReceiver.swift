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

    /// A message of a kind no handler takes, which the library answers itself (a statistics
    /// query, kind 6), read from `frames` (as received: any routing id first) while they are
    /// lent; nil for a message to drop. Asked only of a message the decoder rejected as of
    /// an unknown kind: never on the common message's way.
    func libraryQuery(in frames: UnsafeBufferPointer<UnsafeRawBufferPointer>, from socket: ZMQSocket) -> LibraryQuery?

    /// Answers what `libraryQuery` found, once the frames were given back.
    func answer(_ query: LibraryQuery) -> PortDelivery
}

/// A query the library answers in place of a handler: who asked (as its connection proved
/// it) and where the answer goes.
struct LibraryQuery {
    let messageID: Int32
    let correlationID: UInt64
    let returnPath: ReturnPath
    /// Whether the peer proved to run as this process's user: this process (inproc), or an
    /// ipc peer whose `SO_PEERCRED` uid is ours.
    let isSameUser: Bool
    /// Who asked, for the log.
    let peer: String
}

extension WireReceiver {
    /// A requester's connection answers no query: it drops what it rejected.
    func libraryQuery(in frames: UnsafeBufferPointer<UnsafeRawBufferPointer>, from socket: ZMQSocket) -> LibraryQuery? {
        nil
    }

    func answer(_ query: LibraryQuery) -> PortDelivery { .dropped }

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
            return rejected(error, frames: frames, from: socket)
        }
        socket.releaseReceived()
        return deliver(value)
    }

    /// `receiveOne` for a delivery that takes the value it is handed (a reply, moved to
    /// its receiver uncopied): the same steps, the value lent `inout`. (A variant, not a
    /// change to `receiveOne`: a port's delivery, handed the value owned, copied it.)
    @inline(__always)
    func receiveOne<Value>(from socket: ZMQSocket,
                           decode: (UnsafeBufferPointer<UnsafeRawBufferPointer>) throws(WireFormatError) -> Value,
                           taking deliver: (inout Value) -> PortDelivery) -> PortDelivery {
        let frames: UnsafeBufferPointer<UnsafeRawBufferPointer>
        do {
            guard let received = try socket.receiveInPlace(dontWait: true) else { return .empty }
            frames = received
        } catch {
            drop(.receiveFailed, "\(error)")
            return .dropped
        }
        var value: Value
        do {
            value = try decode(frames)
        } catch {
            return rejected(error, frames: frames, from: socket)
        }
        socket.releaseReceived()
        return deliver(&value)
    }

    /// A message the decoder rejected, its frames still lent: given back, and answered
    /// (a library query) or dropped with its reason. Off the common message's way.
    private func rejected(_ error: WireFormatError, frames: UnsafeBufferPointer<UnsafeRawBufferPointer>,
                          from socket: ZMQSocket) -> PortDelivery {
        // A kind the library answers itself (a statistics query) is told apart from a bad
        // message only once the decoder rejected it.
        if case .unknownKind = error, let query = libraryQuery(in: frames, from: socket) {
            socket.releaseReceived()
            return answer(query)
        }
        // A fence (a note of no bytes, `MappedRing.resolve`) did its work as it was read.
        if case .descriptorsNotFound = error, PortEnvelope.isFence(frames) {
            socket.releaseReceived()
            return .dropped
        }
        socket.releaseReceived()
        drop(PortEnvelope.dropReason(rejecting: error), "\(error)")
        return .dropped
    }
}
