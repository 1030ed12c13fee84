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
    /// Where the task is: resumed once, its request cancelled (`cancelRequest()`) when the
    /// task is, its work awaited once started. Protected by `lock`.
    private var state = OneShotStateMachine<CheckedContinuation<Value, any Error>, PerformRequest>.idle

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
            throw awaiter.lock.withLock { awaiter.state.wasCancelled } ? CancellationError() : notRun()
        }
    }

    private func start(_ continuation: CheckedContinuation<Value, any Error>,
                       work: @escaping @Sendable () throws -> Value,
                       post: (@escaping @Sendable () -> Void) throws -> PerformRequest) {
        switch lock.withLock({ state.wait(continuation) }) {
        case .startWork: break
        case .resumeCancelled: return continuation.resume(throwing: CancellationError())
        }
        let signal = NotRunSignal { [self] in resume(with: .failure(PerformNotRun())) }
        do {
            let request = try post { [self] in
                let result = Result { try work() }
                resume(with: result)
                withExtendedLifetime(signal) {} // released with this closure, run or not
            }
            switch lock.withLock({ state.attach(request) }) {
            case .none: break
            case .cancelRequest: request.cancel()
            }
        } catch {
            resume(with: .failure(error))
        }
    }

    /// The task's cancellation handler: cancels the request if it has not started.
    private func cancel() {
        switch lock.withLock({ state.cancelRequest() }) {
        case .cancelRequest(let request): request.cancel() // if not started, its closure goes: the signal resumes the task
        case .none: break
        }
    }

    private func resume(with result: Result<Value, any Error>) {
        switch lock.withLock({ state.complete() }) {
        case .resume(let continuation): continuation.resume(with: result)
        case .none: break
        }
    }
}

/// Calls its action when released: tells a `PerformAwaiter` that its request's closure is
/// gone. Immutable, so `Sendable`.
final class NotRunSignal: Sendable {
    private let action: @Sendable () -> Void
    init(_ action: @escaping @Sendable () -> Void) { self.action = action }
    deinit { action() }
}

/// A perform request was dropped without running (mapped to the caller's error).
struct PerformNotRun: Error {}
