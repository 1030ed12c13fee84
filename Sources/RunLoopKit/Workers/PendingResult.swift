import RunLoopCore
import RunLoopSystem

/// The result of work queued on another thread, for the caller that waits for it
/// (`performAndWait`).
///
/// Thread safety: `wrap`'s closure runs on the loop's thread, `wait` on the caller's.
final class PendingResult<Value: Sendable>: @unchecked Sendable {
    private let outcome = LockedValue<Result<Value, any Error>?>(nil)

    /// `work` as a perform request's closure that keeps its result or error.
    func wrap(_ work: @escaping @Sendable () throws -> Value) -> @Sendable () -> Void {
        { [self] in
            let result = Result { try work() } // outside the lock: the work may take long
            outcome.withLock { $0 = result }
        }
    }

    /// Blocks until `request` has run or was cancelled; returns the work's result, rethrows
    /// its error, or throws `cancelled()` if it never ran.
    func wait(for request: PerformRequest, cancelled: () -> RunLoopError) throws -> Value {
        switch request.waitUntilFinished() {
        case .done:
            return try outcome.withLock { $0 }!.get()
        case .pending, .running, .cancelled:
            throw cancelled()
        }
    }
}

extension PerformRequest {
    /// Blocks until the request has run; throws `cancelled()` if it never will.
    func waitUntilDone(cancelled: () -> RunLoopError) throws(RunLoopError) {
        guard waitUntilFinished() == .done else { throw cancelled() }
    }
}
