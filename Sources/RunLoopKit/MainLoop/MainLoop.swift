import RunLoopCore
import RunLoopSystem

/// The main thread's run loop for a command-line program: what `NSApplication`'s loop is
/// for an app, `MainLoop.run()` is for a tool's `main.swift`.
///
///     // main.swift
///     let worker = try WorkerThread(name: "fetch")
///     try worker.perform {
///         // … the program's work, on the worker …
///         MainLoop.stop()            // from any thread: the program is done
///     }
///     MainLoop.run()                 // services the main thread's sources, timers, ports
///                                    // and performs until `stop()`
///     worker.stop()
///
/// `run()` keeps `ThreadRunLoop.main` alive with an input source of its own and runs its
/// default mode until `stop()`, so it neither returns early when the mode has nothing
/// else in it, nor runs forever (as `-[NSRunLoop run]` can). It takes work with the run
/// loop's verbs (`perform`, `performAndWait`, `perform(after:)`, `cancelPerformRequests`,
/// `submit`): Table 3-2's `performSelectorOnMainThread:withObject:waitUntilDone:modes:`.
///
/// Thread safety: `run()` on the main thread only; everything else from any thread.
public enum MainLoop {
    private enum Phase {
        /// Not running; a `stop()` came since the last run, so the next run returns at once.
        case idle(stopRequested: Bool)
        case running(KeepAlive)
    }

    private static let phase = LockedValue(Phase.idle(stopRequested: false))

    /// The main thread's run loop.
    public static var loop: ThreadRunLoop { ThreadRunLoop.main }

    /// Whether `run()` is running. Any thread.
    public static var isRunning: Bool {
        phase.withLock { if case .running = $0 { true } else { false } }
    }

    /// Runs the main thread's loop in the default mode until `stop()`. If `stop()` was
    /// called since the last run ended (say, by a worker that finished before the main
    /// thread got here), returns at once. Also returns if the kernel refuses the loop's
    /// sleep (`RunResult.failed`, logged as an error). Main thread only, and not from within itself.
    public static func run() {
        let loop = ThreadRunLoop.main
        precondition(loop.isOwnerThread, "MainLoop.run() must be called on the main thread")
        let keepAlive = KeepAlive(on: loop)
        let stopRequested = phase.withLock { phase -> Bool in
            guard case .idle(let stopRequested) = phase else {
                preconditionFailure("MainLoop.run() is already running")
            }
            phase = .running(keepAlive)
            return stopRequested
        }
        if stopRequested { keepAlive.requestExit() }
        keepAlive.runUntilExitRequested(loop)
        phase.withLock { $0 = .idle(stopRequested: false) }
        keepAlive.remove()
    }

    /// Runs the main loop, as `run()` does, until `stop()` or until one of `signals` arrives;
    /// returns the signal that stopped it (nil for a `stop()`). A tool stops cleanly on
    /// Ctrl-C and `SIGTERM` with one line:
    ///
    ///     try MainLoop.run(stoppingOn: [.interrupt, .terminate])
    ///     worker.stop()                // its queued work, sends included, runs first
    ///     // … exit status 0
    ///
    /// The signals are watched (`SignalSource`, in the main loop's common modes) only during
    /// the run: their previous actions — for `SIGINT` and `SIGTERM` by default, ending the
    /// process — are restored when it returns, so a second Ctrl-C during the tool's own
    /// clean-up still ends it. The program then ends normally, so before it goes, what its
    /// main thread sent to other processes is written out (`RemotePort.exitFlushLimit`),
    /// which the default action of `SIGTERM` or `SIGINT` would not wait for. Throws if a
    /// signal cannot be watched. Main thread only.
    @discardableResult
    public static func run(stoppingOn signals: Set<UnixSignal>) throws(SystemCallError) -> UnixSignal? {
        let loop = ThreadRunLoop.main
        let caught = LockedValue<UnixSignal?>(nil)
        var sources: [SignalSource] = []
        defer { for source in sources { source.invalidate() } }
        for signal in signals.sorted(by: { $0.rawValue < $1.rawValue }) {
            let source = try SignalSource(signal) { _ in
                caught.withLock { if $0 == nil { $0 = signal } }
                MainLoop.stop()
            }
            sources.append(source)
            loop.add(source, to: .common)
        }
        run()
        return caught.withLock { $0 }
    }

    /// Runs the main loop until `body`, started on the main actor, returns — the way for an
    /// async program to keep its main thread for the main loop. Rethrows `body`'s error.
    ///
    /// An `async` `main` (or a `main.swift` with top-level `await`) loses the main thread at
    /// its first suspension: Swift's runtime parks it in `dispatchMain()`, which ends it (the
    /// main loop is torn down with it: its perform requests are cancelled), and `@MainActor`
    /// code runs on Dispatch's threads from then on. Swift 6.3's hook for replacing the main
    /// executor, `ExecutorFactory`, is SPI (`@_spi(ExperimentalCustomExecutors)`), so
    /// RunLoopKit does not rely on it. What works: call this before the first `await` —
    /// from a synchronous `main`, or at the very start of an `async` one, which still runs
    /// on the main thread until it suspends:
    ///
    ///     @main struct Tool {
    ///         static func main() async throws {
    ///             try MainLoop.run {                 // @MainActor, on the main thread
    ///                 let report = try await fetchAll()
    ///                 print(report)
    ///             }                                  // returns when the body does
    ///         }
    ///     }
    ///
    /// The body's task runs on the main thread, and so do the `@MainActor` jobs and
    /// `DispatchQueue.main` blocks it leads to, interleaved with the loop's ports, timers
    /// and performs. A `stop()` ends the run early and cancels the body's task. Main thread only.
    public static func run(_ body: @escaping @MainActor @Sendable () async throws -> Void) throws {
        let failure = LockedValue<(any Error)?>(nil)
        let task = Task { @MainActor in
            do { try await body() } catch { failure.withLock { $0 = error } }
            MainLoop.stop()
        }
        run()
        task.cancel()
        if let error = failure.withLock({ $0 }) { throw error }
    }

    /// Ends `run()`, or the next one if it is not running. Any thread.
    public static func stop() {
        let keepAlive = phase.withLock { phase -> KeepAlive? in
            switch phase {
            case .idle:
                phase = .idle(stopRequested: true)
                return nil
            case .running(let keepAlive):
                return keepAlive
            }
        }
        keepAlive?.requestExit()
    }

    // MARK: - Handing work to the main thread: `ThreadRunLoop.main`'s verbs (Table 3-2)

    /// `ThreadRunLoop.main.perform(inModes:tag:_:)`
    /// (`performSelectorOnMainThread:withObject:waitUntilDone:NO modes:`). The main thread's
    /// loop is never torn down, so this never fails. Any thread.
    @discardableResult
    public static func perform(inModes modes: [LoopMode] = [.common], tag: String? = nil,
                               _ work: @escaping @Sendable () -> Void) -> PerformRequest {
        ThreadRunLoop.main.perform(inModes: modes, tag: tag, work)
    }

    /// `ThreadRunLoop.main.performAndWait(inModes:_:)`
    /// (`performSelectorOnMainThread:withObject:waitUntilDone:YES modes:`). The main thread
    /// must be running its loop (`run()` or any run of `ThreadRunLoop.main`) for the caller
    /// to return. Any thread.
    public static func performAndWait<T: Sendable>(inModes modes: [LoopMode] = [.common],
                                                   _ work: @escaping @Sendable () throws -> T) throws -> T {
        try ThreadRunLoop.main.performAndWait(inModes: modes, work)
    }

    /// `ThreadRunLoop.main.perform(after:inModes:tag:_:)`. Any thread.
    public static func perform(after delay: Duration, inModes modes: [LoopMode] = [.default], tag: String? = nil,
                               _ work: @escaping @Sendable () -> Void) {
        ThreadRunLoop.main.perform(after: delay, inModes: modes, tag: tag, work)
    }

    /// `ThreadRunLoop.main.submit(inModes:_:)`. Any thread.
    nonisolated(nonsending)
    public static func submit<T: Sendable>(inModes modes: [LoopMode] = [.common],
                                           _ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await ThreadRunLoop.main.submit(inModes: modes, work)
    }

    /// `ThreadRunLoop.main.cancelPerformRequests(tagged:)`. Any thread.
    @discardableResult
    public static func cancelPerformRequests(tagged tag: String? = nil) -> Int {
        ThreadRunLoop.main.cancelPerformRequests(tagged: tag)
    }
}
