import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
/// The async form of `performAndWait`: the caller's task suspends, no thread blocks.
extension ThreadRunLoop {
    /// Runs `work` on this loop's thread in its next pass in one of `modes`, and returns its
    /// result (the async `performAndWait`): the calling task suspends meanwhile instead of
    /// blocking its thread. On the loop's own thread (from an actor pinned to this loop, say)
    /// it runs at once. It is a perform request: FIFO with the loop's other perform requests.
    ///
    /// Throws the error `work` threw; `CancellationError` if the task is cancelled before
    /// the work started (the request is cancelled and never runs; work that started is
    /// awaited); `RunLoopError.loopTerminated` if the loop's thread has exited or exits
    /// first; `RunLoopError.cancelled` if `cancelPerformRequests` cancelled it. Any thread.
    ///
    /// (Not an overload of `perform(inModes:tag:_:)`: in async code the compiler would pick
    /// the async one for every fire-and-forget `perform` too.)
    nonisolated(nonsending)
    public func submit<T: Sendable>(inModes modes: [LoopMode] = [.common],
                                    _ work: @escaping @Sendable () throws -> T) async throws -> T {
        if isOwnerThread {
            try Task.checkCancellation()
            return try work()
        }
        return try await PerformAwaiter.perform(work, post: { perform(inModes: modes, $0) }) {
            isTornDown ? RunLoopError.loopTerminated : RunLoopError.cancelled
        }
    }
}
