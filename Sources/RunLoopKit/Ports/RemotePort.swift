import RunLoopSystem
import RunLoopZMQ

/// A port to send to (`CFMessagePortCreateRemote` / a remote `NSPort`): an address, from a
/// local port, a name, or a port component of a received message.
///
/// Thread safety: a value; send from any thread (each thread sends through sockets of its own).
public struct RemotePort: Sendable, Hashable, CustomStringConvertible {
    public let address: PortAddress
    /// The CURVE keys, for a port that requires CURVE, and a heartbeat: boxed, so that the
    /// common port — and every message that carries one — copies one reference for them,
    /// not several.
    private var extras: Extras?

    /// What few ports have: CURVE keys, a heartbeat set by hand.
    private final class Extras: Sendable, Hashable {
        let serverKey: String?
        let clientKeys: PortKeyPair?
        let heartbeat: PortHeartbeat?

        init(serverKey: String?, clientKeys: PortKeyPair?, heartbeat: PortHeartbeat?) {
            self.serverKey = serverKey
            self.clientKeys = clientKeys
            self.heartbeat = heartbeat
        }

        /// These extras, or nil if they hold nothing.
        static func make(serverKey: String?, clientKeys: PortKeyPair?, heartbeat: PortHeartbeat?) -> Extras? {
            guard serverKey != nil || clientKeys != nil || heartbeat != nil else { return nil }
            return Extras(serverKey: serverKey, clientKeys: clientKeys, heartbeat: heartbeat)
        }

        static func == (lhs: Extras, rhs: Extras) -> Bool {
            lhs.serverKey == rhs.serverKey && lhs.clientKeys == rhs.clientKeys && lhs.heartbeat == rhs.heartbeat
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(serverKey)
            hasher.combine(clientKeys)
            hasher.combine(heartbeat)
        }
    }

    /// The CURVE public key of the port, if it requires CURVE (`LocalPort.requireCurve`).
    public var curveServerKey: String? { extras?.serverKey }
    /// The key pair this sender shows a CURVE port, if it has one; without it, each
    /// connection makes a fresh pair, which no allow-list holds.
    public var clientKeys: PortKeyPair? { extras?.clientKeys }

    /// The ZMTP heartbeats of a thread's connection to the port (`PortHeartbeat`), nil (the
    /// default) for none. A connection lost to them fails the requests outstanding on it at
    /// once with `remoteInvalid`. Without them, a tcp connection is watched by the kernel's
    /// keepalive, which a receiver that falls behind still answers (see `PortHeartbeat`);
    /// over ipc the kernel tells at once when a peer on this host dies. Ports that differ
    /// in it are different destinations: each has its own connections.
    public var heartbeat: PortHeartbeat? {
        get { extras?.heartbeat }
        set { extras = Extras.make(serverKey: extras?.serverKey, clientKeys: extras?.clientKeys, heartbeat: newValue) }
    }

    /// The heartbeat a connection sets: none within the process, whatever was set.
    var effectiveHeartbeat: PortHeartbeat? {
        address.isInProcess ? nil : heartbeat
    }

    public init(_ address: PortAddress) {
        self.address = address
        extras = nil
    }

    /// A port reached with `heartbeat` (nil: none): see `heartbeat`.
    public init(_ address: PortAddress, heartbeat: PortHeartbeat?) {
        self.init(address)
        self.heartbeat = heartbeat
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
        extras = Extras(serverKey: curveServerKey, clientKeys: clientKeys, heartbeat: nil)
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

/// ZMTP heartbeats on a connection to a port of another process or machine
/// (`ZMQ_HEARTBEAT_IVL`, `ZMQ_HEARTBEAT_TIMEOUT`, `ZMQ_HEARTBEAT_TTL`): the connection
/// sends a PING every `interval`; one that receives nothing for `timeout` after a PING is
/// closed, and the requests outstanding on it fail at once with `PortError.remoteInvalid`.
/// A peer that falls silent (stopped, frozen, its machine or network gone, with no FIN or
/// reset ever coming) is so noticed between `timeout` and `interval + timeout` after it
/// did: within 2.5 intervals with the default timeout. Each PING also asks the peer to
/// close the connection if it hears nothing from this side for `ttl`.
///
/// Off unless set on a `RemotePort` (`heartbeat`), because a PING is answered only once
/// the receiver has read everything sent before it: a receiver that falls behind by more
/// than `timeout` (its queue full while its handler works, or a backlog that takes that
/// long to read) is taken for silent, and what libzmq still held for it is lost. Set them
/// where the peer keeps up, as a requester does with a server that answers each request.
/// Without them a tcp connection has the kernel's keepalive (a probe after 2 idle
/// seconds, then every second; the third unanswered closes the connection), which the
/// receiver's kernel answers however far behind its port is: a machine or network that
/// vanished is noticed within 5 s of the connection going quiet, a frozen process never.
public struct PortHeartbeat: Sendable, Hashable, CustomStringConvertible {
    /// How often a PING is sent (whole milliseconds, at least 1).
    public let interval: Duration
    /// How long after a PING the connection may stay silent before it is closed.
    public let timeout: Duration
    /// How long the peer may hear nothing before it closes the connection (sent in each
    /// PING, in deciseconds: at most 6,553.5 s).
    public let ttl: Duration

    /// Heartbeats every `interval`; `timeout` defaults to 1.5 intervals (so that a silent
    /// peer is noticed within 2.5), `ttl` to 3.
    public init(interval: Duration, timeout: Duration? = nil, ttl: Duration? = nil) {
        precondition(interval >= .milliseconds(1), "a heartbeat interval is at least 1 ms")
        self.interval = interval
        self.timeout = timeout ?? interval * 3 / 2
        self.ttl = min(ttl ?? interval * 3, .milliseconds(6_553_599))
    }

    /// A PING a second, a peer silent for 1.5 s after one taken for gone: what tcp ports
    /// had unless set, before a receiver that fell behind was found to lose messages to it.
    @available(*, deprecated, message: "tcp ports have no heartbeat unless set: use PortHeartbeat(interval: .seconds(1)) where the peer keeps up")
    public static let tcpDefault = PortHeartbeat(interval: .seconds(1))

    public var description: String { "PortHeartbeat(interval: \(interval), timeout: \(timeout), ttl: \(ttl))" }
}
