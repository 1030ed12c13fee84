import RunLoopCore
import RunLoopSystem

/// One asynchronous request in flight (`RemotePort.request`): its parameters, and the
/// awaiting task's continuation, resumed exactly once by whichever comes first: the reply,
/// the receive timeout or a send error (on the requester's thread), or the task's
/// cancellation (on the cancelling thread, at once, whatever the requester is doing).
///
/// Thread safety: `install`, `finish`, `cancel` and `isFinished` from any thread;
/// `correlationID`, `timer` and `connection` on the requester's thread only.
final class RequestExchange: @unchecked Sendable {
    let message: LoopMessage
    let target: RemotePort
    let sendTimeout: Duration
    let receiveTimeout: Duration

    private let lock = Lock()
    private var state = State<CheckedContinuation<LoopMessage, any Error>>.starting // protected by lock

    // Requester thread only: set once the request is sent.
    var correlationID: UInt64?
    var timer: LoopTimer?
    /// The connection the request went out on, whose reply it awaits.
    var connection: PortConnection?

    init(message: LoopMessage, target: RemotePort, sendTimeout: Duration, receiveTimeout: Duration) {
        self.message = message
        self.target = target
        self.sendTimeout = sendTimeout
        self.receiveTimeout = receiveTimeout
    }

    /// Hands the request to `requester` and suspends until it is answered, fails or the
    /// task is cancelled; the task suspends on the caller's actor (no hop off it first).
    func run(on requester: AsyncRequester, isolation: isolated (any Actor)? = #isolation) async throws -> LoopMessage {
        try await withTaskCancellationHandler {
            _ = isolation // captured, so that this closure runs on the caller's actor (see PerformAwaiter)
            return try await withCheckedThrowingContinuation { continuation in
                if install(continuation) { requester.start(self) }
            }
        } onCancel: {
            if cancel() { requester.forget(self) }
        }
    }

    /// Keeps the continuation; returns false (having resumed it with `CancellationError`)
    /// if the task was cancelled already.
    func install(_ continuation: CheckedContinuation<LoopMessage, any Error>) -> Bool {
        let installed = lock.withLock { state.install(continuation) }
        if !installed { continuation.resume(throwing: CancellationError()) }
        return installed
    }

    /// Resumes the task with `result` unless it was resumed already; returns whether it did.
    @discardableResult
    func finish(_ result: Result<LoopMessage, any Error>) -> Bool {
        let continuation = lock.withLock { state.finish() }
        continuation?.resume(with: result)
        return continuation != nil
    }

    /// The task's cancellation: resumes it with `CancellationError` unless it was resumed
    /// already; returns whether it did (the requester then has to forget the request).
    func cancel() -> Bool {
        let continuation = lock.withLock { state.cancel() }
        continuation?.resume(throwing: CancellationError())
        return continuation != nil
    }

    /// Whether the task was resumed (or cancelled before it waited).
    var isFinished: Bool { lock.withLock { state.isFinished } }
}

extension RequestExchange {
    /// Where the awaiting task is: each continuation is resumed exactly once, by the first
    /// of the reply, a failure or the cancellation, and a cancellation that comes before the
    /// task waits is kept for when it does. Pure transitions (generic over the waiter, so
    /// that they are tested without a task: `RequestExchangeStateTests`); the exchange
    /// applies them under its lock and resumes what they return outside it.
    enum State<Waiter> {
        /// The task has not handed over its continuation yet.
        case starting
        /// The task was cancelled before it waited: it resumes with `CancellationError`
        /// as it hands over its continuation, and the request is never sent.
        case cancelledBeforeWaiting
        /// The task waits for the reply.
        case waiting(Waiter)
        /// The task was resumed.
        case finished

        /// The task hands over `waiter`: true if it now waits, false if it was cancelled
        /// already (the caller then resumes `waiter` with `CancellationError`).
        mutating func install(_ waiter: Waiter) -> Bool {
            switch self {
            case .starting:
                self = .waiting(waiter)
                return true
            case .cancelledBeforeWaiting:
                self = .finished
                return false
            case .waiting, .finished:
                preconditionFailure("a request's task handed over its continuation twice")
            }
        }

        /// The reply, a timeout or a send error: the waiter to resume, unless it was already.
        mutating func finish() -> Waiter? {
            guard case .waiting(let waiter) = self else { return nil }
            self = .finished
            return waiter
        }

        /// The task's cancellation: the waiter to resume with `CancellationError`, unless it
        /// was resumed already or does not wait yet.
        mutating func cancel() -> Waiter? {
            switch self {
            case .starting:
                self = .cancelledBeforeWaiting
                return nil
            case .waiting(let waiter):
                self = .finished
                return waiter
            case .cancelledBeforeWaiting, .finished:
                return nil
            }
        }

        /// Whether the task was resumed or cancelled: the request need not (or no longer) be sent.
        var isFinished: Bool {
            switch self {
            case .starting, .waiting: false
            case .cancelledBeforeWaiting, .finished: true
            }
        }
    }
}

extension RequestExchange.State: Equatable where Waiter: Equatable {}
