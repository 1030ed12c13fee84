import RunLoopSystem

/// One task awaiting the result of a perform request (the async forms of `performAndWait`
/// and `WorkerThread.sync`): the request's closure resumes the task with the work's result
/// on the loop's thread, so no thread blocks while the task waits.
///
/// A request that never runs must resume its task too. `PerformRequest` releases its closure
/// when cancelled, whoever cancels it (the task's cancellation handler, a
/// `cancelPerformRequests`, a worker's stop, the loop's teardown), so the closure holds a
/// `NotRunSignal` whose deinit resumes the task with `PerformNotRun`; once the work ran,
/// that signal finds the task already resumed. `PerformNotRun` is mapped to the caller's
/// error after the task resumed, outside every lock (the signal fires inside the request's).
///
/// Thread safety: every member from any thread.
package final class PerformAwaiter<Value: Sendable>: @unchecked Sendable {
    private let lock = Lock()
    private var state = State<CheckedContinuation<Value, any Error>, PerformRequest>.starting // protected by lock

    /// Posts `work` with `post` and suspends until it ran, returning or rethrowing its
    /// result. Throws `CancellationError` if the task is cancelled before the work starts
    /// (the request is then cancelled), and `notRun()` if the request is cancelled otherwise;
    /// `post` may throw to refuse the work. Work that started is awaited even if the task
    /// is cancelled meanwhile: its effects happen, so its result is returned.
    package static func perform(
        _ work: @escaping @Sendable () throws -> Value,
        post: (@escaping @Sendable () -> Void) throws -> PerformRequest,
        notRun: () -> any Error,
        isolation: isolated (any Actor)? = #isolation
    ) async throws -> Value {
        let awaiter = PerformAwaiter()
        do {
            return try await withTaskCancellationHandler {
                // A closure runs on an isolated parameter's actor only if it captures it: so
                // the task suspends on the caller's actor instead of hopping off it first.
                _ = isolation
                return try await withCheckedThrowingContinuation { continuation in
                    awaiter.start(continuation, work: work, post: post)
                }
            } onCancel: {
                awaiter.cancel()
            }
        } catch is PerformNotRun {
            throw awaiter.lock.withLock { awaiter.state.taskCancelled } ? CancellationError() : notRun()
        }
    }

    private func start(_ continuation: CheckedContinuation<Value, any Error>,
                       work: @escaping @Sendable () throws -> Value,
                       post: (@escaping @Sendable () -> Void) throws -> PerformRequest) {
        let waits = lock.withLock { state.start(continuation) }
        guard waits else { return continuation.resume(throwing: CancellationError()) }
        let signal = NotRunSignal { [self] in resume(with: .failure(PerformNotRun())) }
        do {
            let request = try post { [self] in
                let result = Result { try work() }
                resume(with: result)
                withExtendedLifetime(signal) {} // released with this closure, run or not
            }
            let cancelledMeanwhile = lock.withLock { state.posted(request) }
            cancelledMeanwhile?.cancel()
        } catch {
            resume(with: .failure(error))
        }
    }

    /// The task's cancellation handler: cancels the request if it has not started.
    private func cancel() {
        let request = lock.withLock { state.cancel() }
        request?.cancel() // if it had not started, its closure goes and the signal resumes the task
    }

    private func resume(with result: Result<Value, any Error>) {
        let continuation = lock.withLock { state.resume() }
        continuation?.resume(with: result)
    }
}

extension PerformAwaiter {
    /// Where the awaiting task is, with what is valid there: its continuation while it
    /// waits, the request once posted, and whether the task was cancelled. The task is
    /// resumed exactly once; a cancellation cancels the request, at once if it is posted,
    /// else as soon as it is. Pure transitions (generic over the waiter and the request, so
    /// that they are tested without a task or a loop: `PerformAwaiterStateTests`); the
    /// awaiter applies them under its lock and resumes or cancels what they return outside it.
    enum State<Waiter, Request> {
        /// The task has not handed over its continuation yet.
        case starting
        /// The task was cancelled before it waited: it resumes with `CancellationError`
        /// as it hands over its continuation, and nothing is posted.
        case cancelledBeforeWaiting
        /// The task waits; `request` is nil until the work is posted.
        case waiting(Waiter, request: Request?)
        /// The task waits and was cancelled: its request was cancelled, or is as it is posted.
        case waitingCancelled(Waiter)
        /// The task was resumed; whether it was cancelled maps a not-run request to
        /// `CancellationError` rather than the caller's error.
        case resumed(taskCancelled: Bool)

        /// The task hands over `waiter`: true if it now waits (the caller posts the work),
        /// false if it was cancelled already (the caller resumes `waiter` with `CancellationError`).
        mutating func start(_ waiter: Waiter) -> Bool {
            switch self {
            case .starting:
                self = .waiting(waiter, request: nil)
                return true
            case .cancelledBeforeWaiting:
                self = .resumed(taskCancelled: true)
                return false
            case .waiting, .waitingCancelled, .resumed:
                preconditionFailure("a perform's task handed over its continuation twice")
            }
        }

        /// The work was posted as `request`: returns it if the task was cancelled meanwhile
        /// (the caller cancels it), else keeps it for a later cancellation.
        mutating func posted(_ request: Request) -> Request? {
            switch self {
            case .waiting(let waiter, _):
                self = .waiting(waiter, request: request)
                return nil
            case .waitingCancelled:
                return request
            case .resumed(let taskCancelled):
                return taskCancelled ? request : nil // it ran or went already: cancelling it does nothing
            case .starting, .cancelledBeforeWaiting:
                preconditionFailure("a perform was posted before its task waited")
            }
        }

        /// The task's cancellation: the request to cancel, if it is posted and the task waits.
        mutating func cancel() -> Request? {
            switch self {
            case .starting:
                self = .cancelledBeforeWaiting
                return nil
            case .waiting(let waiter, let request):
                self = .waitingCancelled(waiter)
                return request
            case .resumed:
                self = .resumed(taskCancelled: true)
                return nil
            case .cancelledBeforeWaiting, .waitingCancelled:
                return nil
            }
        }

        /// The work ran, its request went, or the post failed: the waiter to resume,
        /// unless it was resumed already.
        mutating func resume() -> Waiter? {
            switch self {
            case .waiting(let waiter, _):
                self = .resumed(taskCancelled: false)
                return waiter
            case .waitingCancelled(let waiter):
                self = .resumed(taskCancelled: true)
                return waiter
            case .starting, .cancelledBeforeWaiting, .resumed:
                return nil
            }
        }

        /// Whether the task was cancelled (so a request that did not run means `CancellationError`).
        var taskCancelled: Bool {
            switch self {
            case .starting, .waiting: false
            case .cancelledBeforeWaiting, .waitingCancelled: true
            case .resumed(let taskCancelled): taskCancelled
            }
        }
    }
}

extension PerformAwaiter.State: Equatable where Waiter: Equatable, Request: Equatable {}

/// Calls its action when released: tells a `PerformAwaiter` that its request's closure is
/// gone. Immutable, so `Sendable`.
final class NotRunSignal: Sendable {
    private let action: @Sendable () -> Void
    init(_ action: @escaping @Sendable () -> Void) { self.action = action }
    deinit { action() }
}

/// A perform request was dropped without running (mapped to the caller's error).
struct PerformNotRun: Error {}
