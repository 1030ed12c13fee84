import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
import Glibc
import Logging
import Synchronization

/// A port that receives (`NSMachPort`, `NSMessagePort`, a local `CFMessagePort`): a ZeroMQ
/// ROUTER socket owned by the thread that created it, serviced by that thread's run loop as
/// a port-based input source once added to it. It answers each request over the connection
/// the request came in on, so it holds nothing per requester once the requester is gone.
///
/// The object itself may be passed to other threads, which send to it with `send` (or
/// through `remote`); only the owner thread receives. Named ports are found by name from
/// this process (over inproc) and from other processes of the same user (over ipc); a port
/// can also be bound to tcp endpoints for other machines.
///
/// Thread safety: `send`, `remote`, `invalidate()`, `isValid` and `statistics` from any
/// thread; `handler`, `register(name:)`, `requireCurve`, `bind(tcp:)` and adding to a loop on the
/// owner thread; `allowedClients` from any thread.
public final class LocalPort: @unchecked Sendable, CustomStringConvertible, LoopOwnedResource {
    /// Handles a message copied out (`PortHandler.returning`): for a request, the returned
    /// message's components are the reply, sent with the request's id (an empty reply if
    /// nil); for other messages the return value is ignored.
    public typealias Handler = (LoopMessage) throws -> LoopMessage?

    /// Handles a message lent in place (`PortHandler.borrowing`; see `LoopMessageView`).
    /// Its return value and its errors are a `Handler`'s.
    public typealias BorrowingHandler = (borrowing LoopMessageView) throws -> LoopMessage?

    /// Handles a message copied out with, for a request, its reply right (nil for other
    /// messages): `PortHandler.deferring`.
    public typealias DeferringHandler = (LoopMessage, consuming ReplyRight?) throws -> Void

    /// How the port hands over its messages; set it on the owner thread. Messages arriving
    /// without one are dropped and logged (a request is answered with a no reply).
    public var handler: PortHandler? {
        get {
            if let returningHandler { return .returning(returningHandler) }
            if let borrowingHandler { return .borrowing(borrowingHandler) }
            return deferringHandler.map(PortHandler.deferring)
        }
        set {
            returningHandler = nil
            borrowingHandler = nil
            deferringHandler = nil
            switch newValue {
            case .returning(let handler): returningHandler = handler
            case .borrowing(let handler): borrowingHandler = handler
            case .deferring(let handler): deferringHandler = handler
            case nil: break
            }
            readsSourceDescriptor = deferringHandler != nil
        }
    }

    // The handler, kept as one optional closure per kind (at most one set), each read on its
    // own per message: a switch over the enum copies its payload through value witnesses
    // (hot-path: no-witness-copies, docs/optimization-tips.md). Owner thread only.
    @exclusivity(unchecked) var returningHandler: Handler?
    @exclusivity(unchecked) var borrowingHandler: BorrowingHandler?
    @exclusivity(unchecked) var deferringHandler: DeferringHandler?

    /// Told of every error a handler throws, on the owner thread. Without it, each such
    /// error is logged as a warning on `runloopkit.port`, the only way a program would learn
    /// of it. Counted in `statistics.handlerErrors` either way.
    @exclusivity(unchecked) public var onHandlerError: ((any Error, LoopMessage) -> Void)?

    /// The port's inproc address, how this process reaches it.
    let inProcessAddress: PortAddress
    let owner: pthread_t
    /// The owner thread's loop, which closes the port if the thread exits first.
    private(set) weak var ownerLoop: ThreadRunLoop?
    package let pollDescriptor: Int32
    public let statistics = PortStatistics()

    /// The port's ROUTER socket, closed (`isOpen` false) when the port closes and kept until
    /// the port goes: a `let`, so that a receive borrows it from the port instead of
    /// retaining it (as `PortConnection`'s). Owner thread only.
    let socket: ZMQSocket
    // Owner thread only.
    var registration: PortDirectory.Registration?
    /// A named port's descriptor side channel (`<name>.fds` beside its socket), where
    /// senders' descriptors wait for their messages; closed with the port. In a box the
    /// port holds for its whole life (a `let`), which the receive path passes on without
    /// retaining anything, and opens only for a message with descriptors.
    let descriptorSlot = DescriptorReceiverSlot()
    var descriptorReceiver: DescriptorReceiver? { descriptorSlot.receiver }
    private(set) var tcpAddresses: [PortAddress] = []
    /// The reply address of the last message, validated (see `ReplyAddressCache`).
    @exclusivity(unchecked) var replyAddresses = ReplyAddressCache() // The decoder's alone.
    /// Reads each received message's sender (see `MessageSender`); the receive path's alone.
    @exclusivity(unchecked) var senderReader = MessageSenderReader()
    /// The last delivered message's buffers, for the next (see `ReceivedMessageStorage`);
    /// the receive path's alone.
    @exclusivity(unchecked) var storage = ReceivedMessageStorage()
    /// A request a borrowing handler answered, from its handler's return until its frames
    /// are given back and the answer is sent (`deliverInPlace`); the receive path's alone.
    @exclusivity(unchecked) var borrowedAnswer: BorrowedAnswer?
    /// The requests delivered with their reply rights and not yet answered, by connection
    /// and correlation id, so that a cancel from the connection finds its request. The
    /// receive path's and the answers' alone (both on the owner thread).
    @exclusivity(unchecked) var outstandingRequests = OutstandingRequestTable()
    /// Whether the receive path reads each message's connection descriptor (a deferring
    /// handler's requests are kept by it, to learn when their requester goes), and the
    /// last one read; the receive path's alone.
    @exclusivity(unchecked) var readsSourceDescriptor = false
    @exclusivity(unchecked) var lastSourceDescriptor: Int32?
    /// In-process requesters' connections closed while the port may still hold requests of
    /// theirs that it has not read (`inProcessRequesterGone`): such a request is delivered
    /// cancelled. Forgotten once the port has read everything queued. Owner thread only.
    @exclusivity(unchecked) var goneInProcessRequesters: Set<RoutingID> = []
    /// Reports which of the port's ipc and tcp connections went, once a request kept with
    /// its right came in on one; released before the socket closes. Owner thread only.
    @exclusivity(unchecked) var clientWatch: ZMQDisconnectMonitor?
    /// Whether the port is a CURVE server (`requireCurve`). Owner thread only.
    private(set) var requiresCurve = false
    /// The ZAP domain the port's policy is registered under, if it requires CURVE. Owner thread only.
    private var authenticationDomain: String?
    /// The clients the port accepts, if it has an allow-list (`requireCurve(_:allowing:)`).
    public private(set) var allowedClients: PortClientAllowList? {
        get { allowList.withLock { $0 } }
        set { allowList.withLock { $0 = newValue } }
    }
    private let allowList = LockedValue<PortClientAllowList?>(nil)

    /// Where the port is in its life; changes only through `transition(_:)`. Any thread.
    private let lifecycle = Atomic<Lifecycle>(.open)
    /// The address other ports are given: tcp if bound, else ipc if named, else inproc.
    let advertised: LockedValue<PortAddress>
    let registeredName = LockedValue<String?>(nil)

    private static let counter = Atomic<UInt64>(0)

    /// Messages a port queues before senders wait, by default (`ZMQ_RCVHWM`).
    public static let defaultReceiveHighWaterMark: Int32 = 10_000

    /// Creates a port on the calling thread; with a `name`, registers it (see `register(name:)`).
    ///
    /// `receiveHighWaterMark` bounds the messages queued for it (with each sender's own
    /// 10,000): once reached, senders wait, and fail with `sendTimedOut` at their deadline.
    /// `peerLimits` bounds each frame a peer over ipc or tcp sends, and how long its
    /// connection may take to complete its handshake.
    ///
    /// Throws `.system` with `tooManyOpenFiles` (`EMFILE`) at the descriptor limit: the
    /// port needs its socket, its thread's loop's poll set (made with the loop's first port)
    /// and, for the process's first port, ZeroMQ's context.
    public convenience init(name: String? = nil, receiveHighWaterMark: Int32 = LocalPort.defaultReceiveHighWaterMark,
                            peerLimits: PeerLimits = .default, handler: Handler? = nil) throws(PortError) {
        try self.init(name: name, receiveHighWaterMark: receiveHighWaterMark, peerLimits: peerLimits,
                      handling: handler.map(PortHandler.returning))
    }

    /// Creates a port on the calling thread with `handler` (see `PortHandler`); otherwise
    /// as `init(name:receiveHighWaterMark:peerLimits:handler:)`.
    public init(name: String? = nil, receiveHighWaterMark: Int32 = LocalPort.defaultReceiveHighWaterMark,
                peerLimits: PeerLimits = .default, handling handler: PortHandler?) throws(PortError) {
        let serial = LocalPort.counter.add(1, ordering: .relaxed).newValue
        inProcessAddress = PortAddress(unchecked: "inproc://runloopkit.\(getpid()).\(serial)")
        advertised = LockedValue(inProcessAddress)
        owner = pthread_self()
        do {
            // The owner loop's poll set is made now if it has none, so that a port is
            // refused here (EMFILE), not when its loop first sleeps.
            try ThreadRunLoop.current.poller.preparePollSet()
            let socket = try ZMQSocket(type: .router)
            // A reply to a requester that is gone fails at once instead of vanishing.
            try socket.setOption(.routerMandatory, true)
            // Before any bind: a listener's connections take the options it was bound with.
            try socket.setOption(.maxMessageSize, Int64(peerLimits.maxFrameBytes))
            try socket.setOption(.handshakeInterval, peerLimits.handshakeMilliseconds)
            try socket.setOption(.receiveHighWaterMark, receiveHighWaterMark)
            try socket.bind(inProcessAddress.rawValue)
            pollDescriptor = try socket.fileDescriptor
            self.socket = socket
        } catch {
            throw .system(error)
        }
        PortDirectory.shared.opened(inProcessAddress, by: self)
        let loop = ThreadRunLoop.current
        ownerLoop = loop
        loop.adopt(self)
        self.handler = handler
        if let name { try register(name: name) }
    }

    /// Makes the port a CURVE server (`ZMQ_CURVE_SERVER`): from now on its tcp and ipc
    /// peers must know `keys.publicKey` (see `RemotePort(_:curveServerKey:)`), and their
    /// traffic is encrypted both ways, replies included; others cannot connect. Senders in
    /// this process are unaffected (they reach the port over inproc). Must be called before
    /// the port is named or bound to tcp, since CURVE applies to the socket's later
    /// endpoints only.
    ///
    /// With `clients`, only clients whose key is on that list are accepted: every other one
    /// is refused in the handshake (it gets `PortError.notAuthorized`), counted in
    /// `statistics.clientsRefused` and logged; none of its messages reaches the handler.
    /// Either way each message from a CURVE client carries its key as `LoopMessage.sender`.
    /// The check is made by the process's ZAP handler (`docs/security.md`), started here if
    /// it is not running yet, under a ZAP domain of the port's own: the key a message carries
    /// is the one this port's policy admitted, never a property the client offered.
    public func requireCurve(_ keys: PortKeyPair, allowing clients: PortClientAllowList? = nil) throws(PortError) {
        try checkOwnerThread()
        guard socket.isOpen else { throw .invalidated }
        guard registration == nil, tcpAddresses.isEmpty else {
            throw .system(SystemCallError(code: .wrongState, call: "requireCurve: the port already has ipc or tcp endpoints"))
        }
        let domain = "runloopkit.\(getpid()).\(inProcessAddress.rawValue.split(separator: ".").last ?? "")"
        do {
            // The handler first: a CURVE server without it would admit any client.
            let authenticator = try ZMQAuthenticator.shared()
            try socket.setOption(.zapDomain, Array(domain.utf8))
            if let clients {
                let refusals = try PortRefusalLog.shared()
                authenticator.register(domain: domain, policy: Self.policy(admitting: clients, statistics: statistics,
                                                                           refusals: refusals, port: "\(inProcessAddress)"))
            } else {
                authenticator.register(domain: domain, policy: Self.admittingEveryKey)
            }
            try socket.setOption(.curveServer, true)
            try socket.setOption(.curveSecretKey, keys.secretCurveKey)
        } catch {
            try? ZMQAuthenticator.shared().unregister(domain: domain)
            throw .system(error)
        }
        requiresCurve = true
        senderReader.readsCurveKey = true
        authenticationDomain = domain
        allowedClients = clients
    }

    /// The ZAP policy of a CURVE port without an allow-list: every client that passed the
    /// handshake (it knows the port's key) is admitted, with its key as user id.
    private static let admittingEveryKey: ZMQAuthenticator.Policy = { request in
        guard let key = request.clientKey else { return .deny(reason: "no CURVE client key") }
        return .allow(userID: key.z85)
    }

    /// The ZAP policy of a port with an allow-list: its clients get their key as user id;
    /// any other is refused and counted, and noted for the refusal log's thread, which logs
    /// it (`PortRefusalLog`): never here, on the ZAP handler's thread, which every
    /// handshake of the process waits on.
    private static func policy(admitting clients: PortClientAllowList, statistics: PortStatistics,
                               refusals: PortRefusalLog, port: String) -> ZMQAuthenticator.Policy {
        { request in
            if let key = request.clientKey, clients.contains(key) { return .allow(userID: key.z85) }
            statistics.countRefusedClient()
            refusals.record(port: port, client: request.clientKey?.z85 ?? "none", address: request.address,
                            mechanism: request.mechanism)
            return .deny(reason: "not on the allow-list")
        }
    }

    /// Binds the port to a tcp endpoint too (for example `tcp://127.0.0.1:*`), for peers on
    /// other machines; returns the bound address (with the port number chosen).
    ///
    /// Safe by default: an address other than a loopback one (`127.0.0.0/8`, `::1`,
    /// `localhost`) is refused with `insecureBind` unless the port requires CURVE
    /// (`requireCurve`), or the caller passes `insecure: true` to let anyone who reaches it
    /// send to the port in the clear.
    ///
    /// libzmq binds an address or an interface name, never a host name: the host
    /// `localhost` is bound as `127.0.0.1` (the address returned says so).
    @discardableResult
    public func bind(tcp endpoint: String, insecure: Bool = false) throws(PortError) -> PortAddress {
        try checkOwnerThread()
        guard endpoint.hasPrefix("tcp://") else { throw .invalidAddress(endpoint) }
        guard socket.isOpen else { throw .invalidated }
        guard requiresCurve || insecure || Self.isLoopback(tcpEndpoint: endpoint) else { throw .insecureBind(endpoint) }
        let endpoint = try asPortError { () throws(SystemCallError) in
            if endpoint.contains("[") { try socket.setOption(.ipv6, true) } // libzmq binds IPv6 only when asked
            try TCPKeepalive.enable(on: socket) // for the connections it accepts
            try socket.bind(Self.bindable(tcpEndpoint: endpoint))
            return try socket.lastEndpoint
        }
        let bound = try PortAddress(validating: endpoint)
        tcpAddresses.append(bound)
        PortDirectory.shared.addAlias(bound, for: inProcessAddress)
        advertised.withLock { $0 = bound }
        return bound
    }

    /// A port freed without `invalidate()` (its last reference was its loop's mode, dropped
    /// at the thread's teardown) still leaves the directory and gives back its name, so that
    /// no sender ever connects to its dead inproc address, where libzmq would quietly queue.
    deinit {
        guard transition(.close) else { return } // close() already did this
        PortDirectory.shared.closing(inProcessAddress)
        answerQueuedRequestsAtClose()
        closeSocketAndGiveBackAddresses()
    }

    /// A handle other threads and processes send to (the best address this port has). Any thread.
    public var remote: RemotePort { RemotePort(advertised.withLock { $0 }) }

    /// Sends `message` to this port. Any thread.
    public func send(_ message: LoopMessage, timeout: Duration = .seconds(5)) throws(PortError) {
        guard isValid else { throw .invalidated }
        try RemotePort(inProcessAddress).send(message, timeout: timeout)
    }

    public var isValid: Bool { lifecycle.load(ordering: .acquiring) == .open }

    /// Removes the port from every mode of its loop, closes its socket and gives back its
    /// name (`NSPort invalidate`). Senders to it then time out. Any thread.
    public func invalidate() {
        guard transition(.invalidate) else { return }
        if isOwnerThread { close(); return }
        let queued = ownerLoop?.runOnOwnerThread { [self] _ in close() } ?? false
        if !queued { close() } // the owner thread is gone: nothing else can touch the socket
    }

    var isOwnerThread: Bool { pthread_equal(pthread_self(), owner) != 0 }

    func checkOwnerThread() throws(PortError) {
        precondition(isOwnerThread, "LocalPort: this must be called on the thread that created the port")
        guard isValid else { throw .invalidated }
    }

    /// Closes the socket, then drops the port's tcp aliases and gives back its name: after
    /// the close, because closing an ipc listener unlinks its socket file, which must never
    /// be the next owner's. (Callers first mark the port closing in the directory, so that
    /// no sender connects to it meanwhile.)
    private func closeSocketAndGiveBackAddresses() {
        clientWatch = nil // stops monitoring while the socket is still open
        socket.close()
        // After the close: until then its handshakes still need the policy.
        if let authenticationDomain { try? ZMQAuthenticator.shared().unregister(domain: authenticationDomain) }
        authenticationDomain = nil
        for address in tcpAddresses { PortDirectory.shared.removeAlias(address) }
        tcpAddresses.removeAll()
        // With the socket closed, no message can claim them: every descriptor waiting closes.
        descriptorSlot.receiver?.invalidate()
        descriptorSlot.receiver = nil
        if let registration { PortDirectory.shared.withdraw(registration) }
        registration = nil
    }

    /// Tears the port down on its owner thread (or once that thread is gone), once.
    func close() {
        guard transition(.close) else { return }
        PortDirectory.shared.closing(inProcessAddress)
        answerOutstandingRequestsAtClose()
        answerQueuedRequestsAtClose()
        ownerLoop?.removePortEverywhere(self)
        closeSocketAndGiveBackAddresses()
        registeredName.withLock { $0 = nil }
        handler = nil
        onHandlerError = nil
    }

    package func closeAtLoopTeardown() { close() }

    public var description: String {
        "LocalPort(\(advertised.withLock { $0 })\(name.map { ", name: \($0)" } ?? ""))"
    }
}

extension LocalPort {
    /// Applies `event` atomically; true for the one caller that has the work to do.
    private func transition(_ event: Lifecycle.Event) -> Bool {
        var current = lifecycle.load(ordering: .acquiring)
        while true {
            let (next, act) = Lifecycle.after(event, from: current)
            guard act else { return false }
            let (exchanged, original) = lifecycle.compareExchange(expected: current, desired: next,
                                                                  ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
    }
}

