import RunLoopCore
import RunLoopWire
import RunLoopZMQ

/// Asking a port, in this process or another of this user, for its statistics.
extension RemotePort {
    /// The port's statistics now (`PortStatistics`, as `PortStatisticsReport`), asked with a
    /// statistics query (wire kind 6, `docs/wire-format.md`) that the port's library answers
    /// on its owner thread; its handler never sees the query.
    ///
    /// A port answers only a peer that proves to run as its own user: this process, or a
    /// process of the same uid over ipc (a named port's address). Over tcp, or from another
    /// user, the query is dropped (counted in its `PortStatistics.statisticsQueriesRefused`)
    /// and this throws `receiveTimedOut` once `timeout` has passed, as it does for a port of
    /// RunLoopKit 0.1, which drops a query as a message of an unknown kind. While waiting,
    /// the calling thread's run loop runs in a private mode only, as in `sendRequest`.
    ///
    /// Throws `receiveTimedOut`, `remoteInvalid` for an in-process port that is closed,
    /// `remoteHandlerFailed` for a reply that is not a statistics report, or `.system`.
    public func statistics(timeout: Duration = .seconds(5)) throws(PortError) -> PortStatisticsReport {
        let query = try StatisticsQuery(to: address)
        defer { query.close() }
        return try query.run(until: .after(timeout))
    }
}

/// One statistics query: a DEALER socket of its own connected to the port, in the calling
/// thread's loop in a private mode until the reply came or the deadline passed. Loop thread only.
final class StatisticsQuery: PortBasedSource, WireReceiver {
    /// The private mode the asking thread's loop runs in meanwhile.
    static let mode = LoopMode("com.runloopkit.statistics")

    let address: PortAddress
    private let socket: ZMQSocket
    let pollDescriptor: Int32
    private let correlationID = UInt64.random(in: 1 ... .max)
    private var reply: LoopMessage?
    private var replyAddresses = ReplyAddressCache()

    init(to address: PortAddress) throws(PortError) {
        self.address = address
        do {
            socket = try ZMQSocket(type: .dealer)
            try socket.setOption(.linger, 0)
            try socket.setOption(.maxMessageSize, Int64(WireLimits.default.maxFrameBytes))
            pollDescriptor = try socket.fileDescriptor
            if !address.isInProcess {
                try socket.setOption(.reconnectInterval, -1)
                try socket.connect(address.rawValue)
            }
        } catch {
            throw .system(error)
        }
        if address.isInProcess {
            do throws(PortError) {
                try PortDirectory.shared.connect(socket, toOpen: address)
            } catch {
                socket.close()
                throw error
            }
        }
    }

    /// Sends the query and runs the loop in `mode` until the reply came or `deadline` passed.
    func run(until deadline: Deadline) throws(PortError) -> PortStatisticsReport {
        let loop = ThreadRunLoop.current
        loop.addItem(.port(self), binding: nil, to: Self.mode)
        defer { loop.removeItem(.port(self), from: Self.mode) }
        // Queued even before the connection is made (no ZMQ_IMMEDIATE): sent once it is.
        let frame = WireCodec.statisticsQuery(correlationID: correlationID)
        let sent: Bool
        do { sent = try socket.send([frame], dontWait: true) } catch { throw .system(error) }
        guard sent else { throw .sendTimedOut(address) }
        loop.sentOnPortSource(self)
        while reply == nil, Deadline.now() < deadline {
            _ = loop.run(mode: Self.mode, until: deadline, returnAfterSourceHandled: true)
        }
        guard let reply else { throw PortError.loggedTimeout(.receiveTimedOut(address)) }
        guard reply.components.count == 1, case .data(let bytes) = reply.components[0],
              let report = PortStatisticsReport(json: bytes) else {
            throw .remoteHandlerFailed(address, reason: "the answer to a statistics query is not a statistics report")
        }
        return report
    }

    func close() { socket.close() }

    func hasPendingMessage() -> Bool {
        guard socket.isOpen, let events = try? socket.events else { return false }
        return events.contains(.pollIn)
    }

    /// A connecting DEALER: see `PortBasedSource.canAskInsteadOfDraining`.
    var canAskInsteadOfDraining: Bool { false }

    func handleOneMessage() -> PortDelivery {
        guard socket.isOpen else { return .empty }
        return receiveOne(from: socket, decode: { (frames) throws(WireFormatError) in
            var storage = ReceivedMessageStorage()
            return try PortEnvelope.decode(frames: frames, limits: .default, replyAddresses: &replyAddresses,
                                           storage: &storage)
        }, deliver: { envelope in
            guard case .reply = envelope.kind, envelope.correlationID == correlationID, reply == nil else {
                drop(.lateReply, "not the answer to this statistics query")
                return .dropped
            }
            reply = envelope.message
            return .delivered
        })
    }

    func detachedFromLoop() {}

    func drop(_ reason: MessageDropReason, _ detail: @autoclosure () -> String) {
        ThreadRunLoop.current.countDroppedMessage(reason)
        RunLoopKitLog.port.debug("message dropped", metadata: [
            "query": "\(address)", "reason": "\(reason)", "detail": "\(detail())",
        ])
    }
}
