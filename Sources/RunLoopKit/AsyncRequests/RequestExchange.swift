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
    private enum State {
        case starting
        case waiting(CheckedContinuation<LoopMessage, any Error>)
        case finished
    }

    let message: LoopMessage
    let target: RemotePort
    let sendTimeout: Duration
    let receiveTimeout: Duration

    private let lock = Lock()
    private var state = State.starting // protected by lock
    private var cancelled = false // protected by lock; set even before `install`

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
        let cancelled = lock.withLock { () -> Bool in
            guard !self.cancelled else {
                state = .finished
                return true
            }
            state = .waiting(continuation)
            return false
        }
        if cancelled { continuation.resume(throwing: CancellationError()) }
        return !cancelled
    }

    /// Resumes the task with `result` unless it was resumed already; returns whether it did.
    @discardableResult
    func finish(_ result: Result<LoopMessage, any Error>) -> Bool {
        let continuation = lock.withLock { () -> CheckedContinuation<LoopMessage, any Error>? in
            guard case .waiting(let continuation) = state else { return nil }
            state = .finished
            return continuation
        }
        continuation?.resume(with: result)
        return continuation != nil
    }

    /// The task's cancellation: resumes it with `CancellationError` unless it was resumed
    /// already; returns whether it did (the requester then has to forget the request).
    func cancel() -> Bool {
        let continuation = lock.withLock { () -> CheckedContinuation<LoopMessage, any Error>? in
            cancelled = true
            guard case .waiting(let continuation) = state else { return nil }
            state = .finished
            return continuation
        }
        continuation?.resume(throwing: CancellationError())
        return continuation != nil
    }

    /// Whether the task was resumed (or cancelled before it waited).
    var isFinished: Bool {
        lock.withLock {
            if case .finished = state { return true }
            return cancelled
        }
    }
}
