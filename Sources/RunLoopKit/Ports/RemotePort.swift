/// A port to send to (`CFMessagePortCreateRemote` / a remote `NSPort`): an address, from a
/// local port, a name, or a port component of a received message.
///
/// Thread safety: a value; send from any thread (each thread sends through sockets of its own).
public struct RemotePort: Sendable, Hashable, CustomStringConvertible {
    public let address: PortAddress

    public init(_ address: PortAddress) { self.address = address }

    /// The port registered under `name`, in this process or another of this user's
    /// (`CFMessagePortCreateRemote`). Throws `nameNotFound` when no live port holds it.
    public init(named name: String) throws(PortError) {
        self = try PortDirectory.shared.lookUp(name)
    }

    /// Sends `message`, waiting at most `timeout` for the peer to take it
    /// (`sendBeforeDate:`). Throws `sendTimedOut` if it does not: nothing is dropped silently.
    public func send(_ message: LoopMessage, timeout: Duration = .seconds(5)) throws(PortError) {
        try send(message, before: .after(timeout))
    }

    public func send(_ message: LoopMessage, before deadline: Deadline) throws(PortError) {
        try ThreadPortState.current.send(WireCodec.encode(message.wire(kind: .message)), to: address, before: deadline)
    }

    public var description: String { "RemotePort(\(address))" }
}
