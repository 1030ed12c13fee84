/// One task's one-shot wait for work done elsewhere (an async perform: `PerformAwaiter`; an
/// async request: RunLoopKit's `RequestExchange`): the task hands over its waiter (its
/// continuation) and the work starts; the work, once posted or sent, is attached as a
/// request that can be cancelled; exactly one outcome resumes the waiter, the work's
/// completion (its result, a failure, a timeout) or the task's cancellation. A cancellation
/// that comes before the task waits is kept for when it does.
///
/// Two cancellations, one per kind of work:
/// - `cancel()`: the cancellation is the outcome. The waiter resumes at once, and the
///   request, if attached, is to be cancelled (an async request, whose reply has no effect
///   of its own).
/// - `cancelRequest()`: the cancellation only cancels the request, at once if it is
///   attached, else as it is; the waiter waits for the request's own outcome (an async
///   perform, whose work, once started, has effects, so its result is returned).
///
/// Pure: a transition changes the state and returns a named action, which the owner applies
/// outside its lock (it resumes a waiter, cancels a request). An action carries what the
/// owner does not hold already. Generic over the waiter and the request, so the transitions
/// are tested with stand-ins (`OneShotStateMachineTests`).
/// hot-path: inlinable-layers (docs/optimization-tips.md)
@usableFromInline package enum OneShotStateMachine<Waiter, Request> {
    /// The task has not handed over its waiter yet.
    case idle
    /// The task was cancelled before it waited: it resumes with `CancellationError` as it
    /// hands over its waiter, and the work never starts.
    case cancelledBeforeWaiting
    /// The task waits; `request` is nil until the work is attached.
    case waiting(Waiter, request: Request?)
    /// The task waits and was cancelled by `cancelRequest()`: its request was cancelled, or
    /// is as it is attached; the request's outcome resumes the task.
    case waitingCancelled(Waiter)
    /// The task was resumed; `cancelled`: whether it was cancelled (by then or since), so
    /// that an outcome saying the work did not run maps to `CancellationError`.
    case finished(cancelled: Bool)

    /// What the owner does after `wait(_:)` (it holds the waiter already).
    @usableFromInline package enum WaitAction {
        /// The task waits: start the work (post it, hand it to the requester).
        case startWork
        /// The task was cancelled before it waited: resume the waiter with
        /// `CancellationError`, and start nothing.
        case resumeCancelled
    }

    /// What the owner does after `attach(_:)` (it holds the request already).
    @usableFromInline package enum AttachAction {
        /// Nothing: the request is kept for a cancellation, or its outcome came already.
        case none
        /// The task was cancelled meanwhile: cancel the request.
        case cancelRequest
    }

    /// What the owner does with an outcome after `complete()`.
    @usableFromInline package enum CompleteAction {
        /// Resume the waiter with the outcome.
        case resume(Waiter)
        /// Drop the outcome: the waiter was resumed already (or has not waited yet).
        case none
    }

    /// What the owner does after `cancel()`.
    @usableFromInline package enum CancelAction {
        /// Resume the waiter with `CancellationError` and cancel `request`, if it was attached.
        case resumeCancelled(Waiter, request: Request?)
        /// Nothing: the cancellation is kept for when the task waits, or comes too late.
        case none
    }

    /// What the owner does after `cancelRequest()`.
    @usableFromInline package enum CancelRequestAction {
        /// Cancel the request; its outcome (it ran, or did not) will resume the waiter.
        case cancelRequest(Request)
        /// Nothing: the request is cancelled as it is attached, or was already, or the
        /// waiter was resumed.
        case none
    }

    /// The task hands over `waiter`.
    @inlinable
    package mutating func wait(_ waiter: Waiter) -> WaitAction {
        switch self {
        case .idle:
            self = .waiting(waiter, request: nil)
            return .startWork
        case .cancelledBeforeWaiting:
            self = .finished(cancelled: true)
            return .resumeCancelled
        case .waiting, .waitingCancelled, .finished:
            preconditionFailure("a task handed over its waiter twice")
        }
    }

    /// The work was posted or sent as `request`: kept for a later cancellation, or to be
    /// cancelled now if the task was cancelled meanwhile.
    @inlinable
    package mutating func attach(_ request: Request) -> AttachAction {
        switch self {
        case .waiting(let waiter, request: nil):
            self = .waiting(waiter, request: request)
            return .none
        case .waitingCancelled:
            return .cancelRequest
        case .finished(let cancelled):
            // It completed already (it ran, or went): cancelling it then does nothing.
            return cancelled ? .cancelRequest : .none
        case .idle, .cancelledBeforeWaiting, .waiting:
            preconditionFailure("work was attached before its task waited, or twice")
        }
    }

    /// The work's outcome (its result, a failure, a timeout, or that it did not run).
    @inlinable
    package mutating func complete() -> CompleteAction {
        switch self {
        case .waiting(let waiter, _):
            self = .finished(cancelled: false)
            return .resume(waiter)
        case .waitingCancelled(let waiter):
            self = .finished(cancelled: true)
            return .resume(waiter)
        case .idle, .cancelledBeforeWaiting, .finished:
            return .none
        }
    }

    /// The task's cancellation, as the outcome: the waiter resumes at once.
    @inlinable
    package mutating func cancel() -> CancelAction {
        switch self {
        case .idle:
            self = .cancelledBeforeWaiting
            return .none
        case .waiting(let waiter, let request):
            self = .finished(cancelled: true)
            return .resumeCancelled(waiter, request: request)
        case .waitingCancelled(let waiter):
            self = .finished(cancelled: true)
            return .resumeCancelled(waiter, request: nil) // its request was cancelled already
        case .finished:
            self = .finished(cancelled: true)
            return .none
        case .cancelledBeforeWaiting:
            return .none
        }
    }

    /// The task's cancellation, as a cancellation of the request only: the waiter waits on
    /// for the request's outcome.
    @inlinable
    package mutating func cancelRequest() -> CancelRequestAction {
        switch self {
        case .idle:
            self = .cancelledBeforeWaiting
            return .none
        case .waiting(let waiter, let request):
            self = .waitingCancelled(waiter)
            guard let request else { return .none } // cancelled as it is attached
            return .cancelRequest(request)
        case .finished:
            self = .finished(cancelled: true)
            return .none
        case .cancelledBeforeWaiting, .waitingCancelled:
            return .none
        }
    }

    /// Whether the task was resumed, or cancelled before it waited: the work need not (or
    /// no longer) start.
    @inlinable
    package var isFinished: Bool {
        switch self {
        case .idle, .waiting, .waitingCancelled: false
        case .cancelledBeforeWaiting, .finished: true
        }
    }

    /// Whether the task was cancelled (so an outcome saying the work did not run means
    /// `CancellationError`).
    @inlinable
    package var wasCancelled: Bool {
        switch self {
        case .idle, .waiting: false
        case .cancelledBeforeWaiting, .waitingCancelled: true
        case .finished(let cancelled): cancelled
        }
    }
}

extension OneShotStateMachine: Equatable where Waiter: Equatable, Request: Equatable {}
extension OneShotStateMachine.CompleteAction: Equatable where Waiter: Equatable {}
extension OneShotStateMachine.CancelAction: Equatable where Waiter: Equatable, Request: Equatable {}
extension OneShotStateMachine.CancelRequestAction: Equatable where Request: Equatable {}
