import RunLoopCore
import RunLoopSystem

/// One asynchronous request in flight (`RemotePort.request`): its parameters, and the
/// awaiting task's continuation, resumed exactly once by whichever comes first: the reply,
/// the receive timeout or a send error (on the requester's thread), or the task's
/// cancellation (on the cancelling thread, at once, whatever the requester is doing).
///
/// Thread safety: `sent`, `finish` and `isFinished` from any thread; `timer` and
/// `connection` on the requester's thread only.
final class RequestExchange: @unchecked Sendable {
    let message: LoopMessage
    let target: RemotePort
    let sendTimeout: Duration
    let receiveTimeout: Duration

    private let lock = Lock()
    /// Where the task is: resumed once, by the first of the reply, a failure and the
    /// cancellation (`cancel()`: at once); its request is its correlation id once sent.
    /// Protected by `lock`.
    private var state = OneShotStateMachine<CheckedContinuation<LoopMessage, any Error>, UInt64>.idle

    // Requester thread only: set once the request is sent.
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
                switch lock.withLock({ state.wait(continuation) }) {
                case .startWork: requester.start(self)
                case .resumeCancelled: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            switch lock.withLock({ state.cancel() }) {
            case .resumeCancelled(let continuation, let request):
                continuation.resume(throwing: CancellationError())
                if let request { requester.forget(self, correlationID: request) } // else not sent yet: see `sent`
            case .none: break
            }
        }
    }

    /// The request went out as `correlationID`: true if its task still waits for the reply,
    /// false if the task was cancelled meanwhile (the requester then cancels the request).
    func sent(as correlationID: UInt64) -> Bool {
        switch lock.withLock({ state.attach(correlationID) }) {
        case .none: true
        case .cancelRequest: false
        }
    }

    /// Resumes the task with `result` unless it was resumed already; returns whether it did.
    @discardableResult
    func finish(_ result: Result<LoopMessage, any Error>) -> Bool {
        switch lock.withLock({ state.complete() }) {
        case .resume(let continuation):
            continuation.resume(with: result)
            return true
        case .none:
            return false
        }
    }

    /// Whether the task was resumed (or cancelled before it waited): the request need not
    /// (or no longer) be sent.
    var isFinished: Bool { lock.withLock { state.isFinished } }
}
