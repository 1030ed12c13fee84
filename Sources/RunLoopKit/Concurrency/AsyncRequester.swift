import Glibc

/// The per-process thread behind `RemotePort.request`: it sends the requests, receives
/// every reply on one reply port of its own, matches replies to requests by correlation id
/// and times them out with timers, so any number of requests wait at once and no thread
/// is held per request (least of all one of the cooperative pool's).
///
/// A send usually completes at once; one whose peer does not take it (absent, or at its
/// high-water mark) holds this thread for up to its send timeout, delaying the other
/// requests' sends, replies and timeouts meanwhile (but not their cancellation, which
/// resumes the task on the cancelling thread).
///
/// Started on first use, never stopped (a process-wide service, like the ZeroMQ context).
///
/// Thread safety: `start` and `forget` from any thread; everything else runs on the
/// requester's thread.
final class AsyncRequester: @unchecked Sendable {
    /// Every async request's requester; the error if its thread could not be started.
    static let shared = Result { () throws(WorkerError) -> AsyncRequester in
        try AsyncRequester(worker: WorkerThread(name: "rlk-requester"))
    }

    let worker: WorkerThread

    // Requester thread only.
    private var replyPort: LocalPort?
    private var inFlight: [UInt64: RequestExchange] = [:]
    private var lastID: UInt64 = 0

    private init(worker: WorkerThread) { self.worker = worker }

    /// Hands a request to the requester's thread, which sends it.
    func start(_ exchange: RequestExchange) {
        do {
            try worker.async { [self] in send(exchange) }
        } catch {
            exchange.finish(.failure(error))
        }
    }

    /// After a cancellation: stops waiting for the request's reply (a reply that still comes
    /// is dropped as late) and invalidates its timer.
    func forget(_ exchange: RequestExchange) {
        _ = try? worker.async { [self] in
            guard let id = exchange.correlationID else { return } // not sent: never will be
            inFlight[id] = nil
            exchange.timer?.invalidate()
        }
    }

    /// How many requests wait for a reply (for tests).
    var waitingCount: Int { (try? worker.sync { [self] in inFlight.count }) ?? 0 }

    /// The reply port's statistics (for tests).
    var replyStatistics: PortStatistics? { try? worker.sync { [self] in replyPort?.statistics } }

    // MARK: - Requester thread

    private func send(_ exchange: RequestExchange) {
        guard !exchange.isFinished else { return } // cancelled before its turn: never sent
        do {
            var request = exchange.message
            request.replyPort = try replyAddress(for: exchange.target)
            lastID &+= 1
            let id = lastID
            try ThreadPortState.current.send(PortEnvelope(.request, request, correlationID: id),
                                             to: exchange.target, before: .after(exchange.sendTimeout))
            // Cancelled while sending: nothing waits, and its reply will be dropped as late.
            guard !exchange.isFinished else { return }
            exchange.correlationID = id
            inFlight[id] = exchange
            let timer = LoopTimer(after: exchange.receiveTimeout) { [unowned self] _ in
                inFlight[id] = nil
                exchange.finish(.failure(RunLoopKitLog.timedOut(.receiveTimedOut(exchange.target.address))))
            }
            exchange.timer = timer
            ThreadRunLoop.current.add(timer, to: .default)
        } catch {
            exchange.finish(.failure(error))
        }
    }

    private func received(_ reply: LoopMessage, for id: UInt64) {
        guard let exchange = inFlight.removeValue(forKey: id) else {
            replyPort?.drop(.lateReply, "late or unknown reply, correlation id \(id)")
            return
        }
        exchange.timer?.invalidate()
        if !exchange.finish(.success(reply)) {
            replyPort?.drop(.lateReply, "the request was cancelled, correlation id \(id)")
        }
    }

    /// The reply port, created on first use; its replies go to `received`.
    private func port() throws(PortError) -> LocalPort {
        if let replyPort { return replyPort }
        let port = try LocalPort()
        port.replyHandler = { [unowned self] id, reply in received(reply, for: id) }
        ThreadRunLoop.current.add(port, to: .default)
        replyPort = port
        return port
    }

    /// Where the target replies (see `LocalPort.replyAddress(toward:privateName:)`).
    private func replyAddress(for target: RemotePort) throws(PortError) -> RemotePort {
        try port().replyAddress(toward: target) { "runloopkit-reply.\(getpid()).async" }
    }
}
