import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
/// The async form of `sync`: the caller's task suspends, no thread blocks.
extension WorkerThread {
    /// Runs `work` on the worker and returns its result (the async `sync`): the calling
    /// task suspends meanwhile instead of blocking its thread. On the worker's own thread
    /// (from an actor pinned to the worker, say) it runs at once. It is a perform request:
    /// FIFO with the worker's other work.
    ///
    /// Throws the error `work` threw; `CancellationError` if the task is cancelled before
    /// the work started (the request is cancelled and never runs; work that started is
    /// awaited); `RunLoopError.stopped` if the worker does not take it or a stop cancels it;
    /// `RunLoopError.cancelled` if `cancelPerformRequests` cancelled it. Any thread.
    nonisolated(nonsending)
    public func run<T: Sendable>(inModes modes: [LoopMode] = [.common],
                                 _ work: @escaping @Sendable () throws -> T) async throws -> T {
        if isCurrent {
            try Task.checkCancellation()
            return try work()
        }
        return try await PerformAwaiter.perform(work, post: { closure in
            guard let request = control.enqueue(inModes: modes, tag: nil, closure) else { throw RunLoopError.stopped }
            return request
        }) {
            control.cancellationError
        }
    }
}
