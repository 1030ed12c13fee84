import RunLoopCore
import RunLoopSystem
import Glibc

/// The per-process thread behind `RemotePort.request`: it sends the requests, receives
/// their replies over the connections they went out on, matches replies to requests by
/// correlation id and times them out with timers, so any number of requests wait at once
/// and no thread is held per request (least of all one of the cooperative pool's).
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
final class AsyncRequester: ReplyReceiver, @unchecked Sendable {
    /// Every async request's requester; the error if its thread could not be started.
    static let shared = Result { () throws(SystemCallError) -> AsyncRequester in
        AsyncRequester(worker: try WorkerThread(name: "rlk-requester"))
    }

    let worker: WorkerThread

    // Requester thread only.
    private var inFlight: [UInt64: RequestExchange] = [:]
    /// Where its requests' replies go: this table, on its thread (set by its first job).
    private var route = ReplyRoute.waiting

    /// Replies are serviced in the requester's default mode, beside its timers and performs.
    var replyMode: LoopMode { .default }

    private init(worker: WorkerThread) {
        self.worker = worker
        // The first job on the worker, so before any request it sends. A worker refuses
        // work only once stopped, and this one, just started, is never stopped.
        _ = try? worker.perform { [self] in route = ThreadPortState.current.route(to: self) }
    }

    /// Hands a request to the requester's thread, which sends it.
    func start(_ exchange: RequestExchange) {
        do {
            try worker.perform { [self] in send(exchange) }
        } catch {
            exchange.finish(.failure(error))
        }
    }

    /// After the cancellation of a request sent as `id`: stops waiting for its reply (a
    /// reply that still comes is dropped as late), invalidates its timer and tells the port,
    /// with a cancel on the connection the request went out on, that it was given up.
    func forget(_ exchange: RequestExchange, correlationID id: UInt64) {
        _ = try? worker.perform { [self] in
            // Settled already by its reply or its timeout.
            guard inFlight.removeValue(forKey: id) != nil else { return }
            exchange.timer?.invalidate()
            exchange.connection?.replySettled()
            exchange.connection?.sendCancel(correlationID: id, messageID: exchange.message.id)
        }
    }

    /// How many requests wait for a reply (for tests).
    var waitingCount: Int { (try? worker.performAndWait { [self] in inFlight.count }) ?? 0 }

    /// Replies dropped as late on the requester's thread (for tests).
    var lateReplies: Int {
        (try? worker.performAndWait { [worker] in worker.loop.counters.messagesDropped[.lateReply] ?? 0 }) ?? 0
    }

    // MARK: - Requester thread

    private func send(_ exchange: RequestExchange) {
        guard !exchange.isFinished else { return } // cancelled before its turn: never sent
        let (id, connection): (UInt64, PortConnection)
        do {
            (id, connection) = try ThreadPortState.current.sendRequest(exchange.message, to: exchange.target,
                                                                      replyTo: route, before: .after(exchange.sendTimeout))
        } catch {
            exchange.finish(.failure(error))
            return
        }
        // Cancelled while sending: nothing waits, and its reply will be dropped as late.
        guard exchange.sent(as: id) else {
            connection.replySettled()
            connection.sendCancel(correlationID: id, messageID: exchange.message.id)
            return
        }
        exchange.connection = connection
        inFlight[id] = exchange
        let timer = LoopTimer(after: exchange.receiveTimeout) { [unowned self] _ in
            inFlight[id] = nil
            connection.replySettled()
            connection.sendCancel(correlationID: id, messageID: exchange.message.id)
            exchange.finish(.failure(PortError.loggedTimeout(.receiveTimedOut(exchange.target.address))))
        }
        exchange.timer = timer
        ThreadRunLoop.current.add(timer, to: .default)
    }

    func connectionLost(_ connection: PortConnection, _ failure: PortError) -> Int {
        let lost = inFlight.filter { $0.value.connection === connection }
        for id in lost.keys { _ = settle(id, with: .failure(failure)) }
        return lost.count
    }

    func received(_ reply: consuming LoopMessage, for id: UInt64) -> Bool {
        settle(id, with: .success(reply))
    }

    func failed(_ failure: PortError, for id: UInt64) -> Bool {
        settle(id, with: .failure(failure))
    }

    /// Finishes the exchange waiting for `id`; false if none does (or it was cancelled meanwhile).
    private func settle(_ id: UInt64, with outcome: Result<LoopMessage, any Error>) -> Bool {
        guard let exchange = inFlight.removeValue(forKey: id) else { return false }
        exchange.timer?.invalidate()
        exchange.connection?.replySettled()
        return exchange.finish(outcome) // false: cancelled meanwhile, so the reply came late
    }
}
