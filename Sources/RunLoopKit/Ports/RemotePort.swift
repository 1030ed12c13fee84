import RunLoopSystem
import RunLoopZMQ

/// A port to send to (`CFMessagePortCreateRemote` / a remote `NSPort`): an address, from a
/// local port, a name, or a port component of a received message.
///
/// Thread safety: a value; send from any thread (each thread sends through sockets of its own).
public struct RemotePort: Sendable, Hashable, CustomStringConvertible {
    public let address: PortAddress
    /// The CURVE keys, for a port that requires CURVE: boxed, so that the common port — and
    /// every message that carries one — copies one reference for them, not three.
    private let curve: CurveKeys?

    /// A CURVE port's keys: its public key, and the pair the sender shows it, if any.
    private final class CurveKeys: Sendable, Hashable {
        let serverKey: String
        let clientKeys: PortKeyPair?

        init(serverKey: String, clientKeys: PortKeyPair?) {
            self.serverKey = serverKey
            self.clientKeys = clientKeys
        }

        static func == (lhs: CurveKeys, rhs: CurveKeys) -> Bool {
            lhs.serverKey == rhs.serverKey && lhs.clientKeys == rhs.clientKeys
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(serverKey)
            hasher.combine(clientKeys)
        }
    }

    /// The CURVE public key of the port, if it requires CURVE (`LocalPort.requireCurve`).
    public var curveServerKey: String? { curve?.serverKey }
    /// The key pair this sender shows a CURVE port, if it has one; without it, each
    /// connection makes a fresh pair, which no allow-list holds.
    public var clientKeys: PortKeyPair? { curve?.clientKeys }

    public init(_ address: PortAddress) {
        self.address = address
        curve = nil
    }

    /// A port that requires CURVE: messages to it are encrypted, and only reach it because
    /// `curveServerKey` is its public key; its replies come back encrypted too. Throws
    /// `invalidKey` for a key that is not 40 characters of Z85.
    ///
    /// With `clientKeys`, the connection shows that key pair: a port with an allow-list
    /// (`requireCurve(_:allowing:)`) accepts it if `clientKeys.publicKey` is on the list,
    /// and its handler sees that key as each message's `sender`.
    public init(_ address: PortAddress, curveServerKey: String, clientKeys: PortKeyPair? = nil) throws(PortError) {
        guard ZMQCurveKey(z85: curveServerKey) != nil else {
            throw .invalidKey("the server key of \(address) is not 40 characters of Z85")
        }
        self.address = address
        curve = CurveKeys(serverKey: curveServerKey, clientKeys: clientKeys)
    }

    /// The port registered under `name`, in this process or another of this user's
    /// (`CFMessagePortCreateRemote`). Throws `nameNotFound` when no live port holds it, and
    /// `.system` when its lock file cannot be tested: `tooManyOpenFiles` (`EMFILE`) at the
    /// descriptor limit, since the test opens the file.
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
        try ThreadPortState.withCurrent { (state) throws(PortError) in try state.send(message, to: self, within: timeout) }
    }

    public func send(_ message: LoopMessage, before deadline: Deadline) throws(PortError) {
        try ThreadPortState.withCurrent { (state) throws(PortError) in try state.send(message, to: self, before: deadline) }
    }

    /// Sends a message with id `id` and one data component, `bytes`, without building a
    /// `LoopMessage` for it: the bytes go from the caller's buffer to libzmq, which copies
    /// them, so nothing is allocated besides what libzmq allocates itself. The receiver
    /// gets what `send(LoopMessage(id: id, components: [.data(bytes)]))` would send.
    /// Waits and throws as `send(_:timeout:)` does. Any thread.
    public func send(id: Int32, bytes: UnsafeRawBufferPointer, timeout: Duration = .seconds(5)) throws(PortError) {
        try ThreadPortState.withCurrent { (state) throws(PortError) in
            try state.send(OutgoingBytes(id: id, bytes: bytes), to: self, within: timeout)
        }
    }

    public var description: String { "RemotePort(\(address))" }
}
