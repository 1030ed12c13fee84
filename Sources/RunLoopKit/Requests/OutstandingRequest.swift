import RunLoopSystem
import Synchronization

/// A request a port delivered with its reply right (`ReplyRight`), from its delivery until
/// it is answered: where the answer goes, what the right's holder did with it, and whether
/// the requester gave it up. Its port keeps it, by connection and correlation id, until it
/// is answered or its requester is gone, so that a cancel from that connection finds it.
///
/// Thread safety: `settle`, `rightDropped`, `onCancel` and `isCancelled` from any thread
/// (the state behind a lock); `handlerEnded` and `cancel` on the port's owner thread.
final class OutstandingRequest: @unchecked Sendable {
    let port: LocalPort
    let requestID: Int32
    let correlationID: UInt64
    let returnPath: ReturnPath
    /// The descriptor of the connection it came in on, if it has one (ipc, tcp). Owner thread only.
    var sourceDescriptor: Int32?

    private let lock = Lock()
    private var state = ReplyRightState() // protected by lock
    private var cancellationHandlers: [@Sendable () -> Void] = [] // protected by lock
    /// `state.isCancelled`, readable without the lock.
    private let cancelled = Atomic<Bool>(false)

    init(port: LocalPort, requestID: Int32, correlationID: UInt64, returnPath: ReturnPath) {
        self.port = port
        self.requestID = requestID
        self.correlationID = correlationID
        self.returnPath = returnPath
    }

    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    /// The right's holder answered (a reply or a failure). Any thread.
    func settle(_ answer: ReplyRightState.Answer) {
        apply(.answered(answer))
    }

    /// The right was dropped (its `deinit`; after an answer, a no-op). Any thread.
    func rightDropped() {
        apply(.dropped)
    }

    /// The handler the right was given to returned, or threw `error`. Owner thread.
    func handlerEnded(throwing error: (any Error)?) {
        apply(error.map { .handlerThrew(LocalPort.failureReason($0)) } ?? .handlerReturned)
    }

    /// Applies `event` and has the port do what it comes to; `ending` the first time the
    /// right is settled, so that it leaves the port's table and count once.
    private func apply(_ event: ReplyRightState.Event) {
        let (action, ending): (ReplyRightState.Action, Bool) = lock.withLock {
            let wasSettled = state.isSettled
            let action = state.after(event)
            return (action, !wasSettled && state.isSettled)
        }
        port.carryOut(action, ending: ending, for: self)
    }

    /// The requester gave the request up, or its connection went: runs the cancellation
    /// handlers (on the calling thread: the owner's). Later answers are dropped.
    func cancel() {
        let handlers: [@Sendable () -> Void] = lock.withLock {
            guard state.cancel() else { return [] }
            cancelled.store(true, ordering: .releasing)
            defer { cancellationHandlers.removeAll() }
            return cancellationHandlers
        }
        for handler in handlers { handler() }
    }

    /// Keeps `handler` for a cancellation; runs it now if the request was cancelled already.
    func onCancel(_ handler: @escaping @Sendable () -> Void) {
        let runNow: Bool = lock.withLock {
            if state.isCancelled { return true }
            if !state.isSettled { cancellationHandlers.append(handler) }
            return false
        }
        if runNow { handler() }
    }
}

/// Where a request's reply right stands, as pure transitions with named actions (tested
/// without a port: `ReplyRightStateTests`). The right is consumed by an answer or dropped;
/// while the handler it was given to runs, a drop waits for the handler's end, so that a
/// handler that throws is answered with its failure rather than a no reply.
struct ReplyRightState: Equatable {
    /// What the right's holder answered.
    enum Answer: Equatable, Sendable {
        case reply(LoopMessage)
        /// A failure, with its reason (at most `LocalPort.maxFailureReasonBytes`).
        case failure(String)
    }

    enum Event: Equatable {
        /// `ReplyRight.reply` or `.fail`.
        case answered(Answer)
        /// The right was dropped (after an answer: its `deinit` runs as the answer consumes it).
        case dropped
        /// The handler the right was given to returned.
        case handlerReturned
        /// That handler threw: the reason its failure carries.
        case handlerThrew(String)
    }

    /// What the port does, on its owner thread.
    enum Action: Equatable {
        /// Nothing now.
        case none
        /// Sends this answer to the requester (its kind: a reply, a failure).
        case send(Answer)
        /// Sends a no reply: the right was let go unanswered.
        case sendNoReply
        /// The requester gave the request up: the answer is dropped, counted as `replyCancelled`.
        case dropCancelled
        /// The request was answered already (by its handler's failure): the answer is
        /// dropped, counted as `replyNotSent`.
        case dropAnswered
    }

    enum Phase: Equatable {
        /// Its handler runs, holding the right or not.
        case inHandler
        /// The right was dropped while its handler ran: answered at the handler's end.
        case droppedInHandler
        /// The handler returned; the right is held somewhere.
        case outstanding
        /// Answered (or let go): nothing more is sent.
        case settled
    }

    private(set) var phase = Phase.inHandler
    private(set) var isCancelled = false

    var isSettled: Bool { phase == .settled }

    /// Applies `event`; returns what to do.
    mutating func after(_ event: Event) -> Action {
        switch (phase, event) {
        case (.inHandler, .answered(let answer)), (.outstanding, .answered(let answer)),
             (.droppedInHandler, .answered(let answer)):
            phase = .settled
            return isCancelled ? .dropCancelled : .send(answer)
        case (.settled, .answered):
            return .dropAnswered
        case (.inHandler, .dropped):
            phase = .droppedInHandler
            return .none
        case (.outstanding, .dropped):
            phase = .settled
            return isCancelled ? .none : .sendNoReply
        case (.droppedInHandler, .dropped), (.settled, .dropped):
            return .none
        case (.inHandler, .handlerReturned):
            phase = .outstanding
            return .none
        case (.droppedInHandler, .handlerReturned):
            phase = .settled
            return isCancelled ? .none : .sendNoReply
        case (.inHandler, .handlerThrew(let reason)), (.droppedInHandler, .handlerThrew(let reason)):
            phase = .settled
            return isCancelled ? .none : .send(.failure(reason))
        case (.outstanding, .handlerReturned), (.outstanding, .handlerThrew), (.settled, .handlerReturned),
             (.settled, .handlerThrew):
            return .none // the handler ends once, before which the right cannot be outstanding
        }
    }

    /// The requester gave the request up: true the first time, while it is unanswered.
    mutating func cancel() -> Bool {
        guard !isCancelled, phase != .settled else { return false }
        isCancelled = true
        return true
    }
}
