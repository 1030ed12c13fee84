import RunLoopWire

extension RemotePort {
    /// Sends a message with id `id` and one data component of `byteCount` bytes that `fill`
    /// writes in place: it is lent the memory libzmq sends the bytes from, so a large
    /// payload is written once and never copied by RunLoopKit. The receiver gets what
    /// `send(LoopMessage(id: id, components: [.data(bytes)]))` would send, `bytes` being
    /// exactly what `fill` wrote; the wire format is the same. Waits and fails as
    /// `send(_:timeout:)` does. Any thread.
    ///
    /// `fill` runs once, before the first attempt to send, and must write all `byteCount`
    /// bytes of the buffer (which starts uninitialized, with no particular alignment: write
    /// with `storeBytes(of:toByteOffset:as:)` or `copyMemory`); the buffer is the send's, valid
    /// only during the call. A component of 64 KiB or more travels in a frame of its own
    /// (`docs/wire-format.md`), which is the buffer `fill` gets; a smaller one is written
    /// into the message's own frame.
    ///
    /// - Throws: `PortFillError.invalidByteCount` for a `byteCount` under 1 and
    ///   `.port(.messageTooLarge)` for one over the wire's 64 MiB per frame, at once, before
    ///   `fill` runs or any connection is made; `.filling` with the error `fill` threw, as it
    ///   threw it; `.port` with what `send(_:timeout:)` would throw. Whatever the error,
    ///   nothing was sent, and the buffer was released.
    // Inlinable, so that `Failure` is specialized in the caller: the send itself
    // (`sendFilled`) is not generic. Unspecialized, the generic path made a 16-byte message
    // cost about twice what `send(id:bytes:timeout:)` costs (port-throughput-processes).
    @inlinable
    public func send<Failure: Error>(id: Int32, byteCount: Int, timeout: Duration = .seconds(5),
                                     filling fill: (UnsafeMutableRawBufferPointer) throws(Failure) -> Void)
        throws(PortFillError<Failure>) {
        guard byteCount > 0 else { throw .invalidByteCount(byteCount) }
        var failure: Failure?
        do throws(PortError) {
            try sendFilled(id: id, byteCount: byteCount, timeout: timeout) { buffer in
                do throws(Failure) {
                    try fill(buffer)
                    return true
                } catch {
                    failure = error
                    return false
                }
            }
        } catch {
            throw .port(error)
        }
        if let failure { throw .filling(failure) }
    }

    /// The send of `send(id:byteCount:timeout:filling:)`, for a `byteCount` of at least 1:
    /// throws `messageTooLarge` at once over the wire's limit, else sends unless `fill`
    /// returns false (it failed: nothing is sent).
    @usableFromInline
    func sendFilled(id: Int32, byteCount: Int, timeout: Duration,
                    filling fill: (UnsafeMutableRawBufferPointer) -> Bool) throws(PortError) {
        let limit = WireLimits.default.maxFrameBytes
        guard byteCount <= limit else { throw .messageTooLarge(size: byteCount, limit: limit) }
        try ThreadPortState.withCurrent { (state) throws(PortError) in
            try state.send(id: id, byteCount: byteCount, to: self, within: timeout, filling: fill)
        }
    }
}

/// What `RemotePort.send(id:byteCount:timeout:filling:)` throws: the send's own error, or
/// the error of the closure that fills the message, as the closure threw it (`Failure`:
/// `Never` for a closure that does not throw). Whichever it is, nothing was sent.
public enum PortFillError<Failure: Error>: Error, CustomStringConvertible {
    /// The send failed or was refused: what `RemotePort.send(_:timeout:)` throws.
    case port(PortError)
    /// The closure that fills the message threw this.
    case filling(Failure)
    /// The byte count asked for is under 1: a lent buffer holds at least one byte.
    case invalidByteCount(Int)

    public var description: String {
        switch self {
        case .port(let error): "\(error)"
        case .filling(let error): "filling the message failed: \(error); not sent"
        case .invalidByteCount(let count): "a message filled in place holds at least 1 byte, not \(count): not sent"
        }
    }
}

extension PortFillError: Equatable where Failure: Equatable {}
