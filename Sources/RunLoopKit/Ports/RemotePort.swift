import RunLoopSystem
import RunLoopZMQ

/// A port to send to (`CFMessagePortCreateRemote` / a remote `NSPort`): an address, from a
/// local port, a name, or a port component of a received message.
///
/// Thread safety: a value; send from any thread (each thread sends through sockets of its own).
public struct RemotePort: Sendable, Hashable, CustomStringConvertible {
    public let address: PortAddress
    /// The CURVE public key of the port, if it requires CURVE (`LocalPort.requireCurve`).
    public let curveServerKey: String?

    public init(_ address: PortAddress) {
        self.address = address
        curveServerKey = nil
    }

    /// A port that requires CURVE: messages to it are encrypted, and only reach it because
    /// `curveServerKey` is its public key; its replies come back encrypted too. Throws
    /// `invalidKey` for a key that is not 40 characters of Z85.
    public init(_ address: PortAddress, curveServerKey: String) throws(PortError) {
        guard ZMQCurveKey(z85: curveServerKey) != nil else {
            throw .invalidKey("the server key of \(address) is not 40 characters of Z85")
        }
        self.address = address
        self.curveServerKey = curveServerKey
    }

    /// The port registered under `name`, in this process or another of this user's
    /// (`CFMessagePortCreateRemote`). Throws `nameNotFound` when no live port holds it.
    public init(named name: String) throws(PortError) {
        self = try PortDirectory.shared.lookUp(name)
    }

    /// Sends `message`, waiting at most `timeout` for the peer to take it
    /// (`sendBeforeDate:`). Throws `sendTimedOut` if it does not: nothing is dropped silently.
    /// The timeout counts from the moment the message could not be queued at once, so a
    /// send that queues at once reads no clock. Throws `messageTooLarge` at once for a data
    /// component over the wire's 64 MiB per frame, which the port would refuse.
    ///
    /// Once it returns, the message is ZeroMQ's to deliver: a thread that exits, or a
    /// process that ends normally, waits for it to be written out (`exitFlushLimit`).
    public func send(_ message: LoopMessage, timeout: Duration = .seconds(5)) throws(PortError) {
        try ThreadPortState.current.send(message, to: self, within: timeout)
    }

    public func send(_ message: LoopMessage, before deadline: Deadline) throws(PortError) {
        try ThreadPortState.current.send(message, to: self, before: deadline)
    }

    public var description: String { "RemotePort(\(address))" }
}
