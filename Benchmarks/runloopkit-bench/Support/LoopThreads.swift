import Dispatch
import Foundation
import RunLoopKit
import Synchronization

/// A thread running a RunLoopKit run loop (`run()` in the default mode) until stopped; its
/// sources are added by `setUp`, on the thread, before the loop runs.
final class RunLoopKitThread: @unchecked Sendable {
    let loop: ThreadRunLoop
    private let thread: JoinableThread

    /// Starts the thread; returns once `setUp` ran there. `setUp` must leave something in
    /// the default mode (a port, a timer), or the loop returns at once.
    init(cpu: Int? = Placement.pair, setUp: @escaping @Sendable () -> Void) {
        let ready = DispatchSemaphore(value: 0)
        let created = Mutex<ThreadRunLoop?>(nil)
        thread = JoinableThread.start(cpu: cpu) {
            let loop = ThreadRunLoop.current
            setUp()
            created.withLock { $0 = loop }
            ready.signal()
            loop.run()
        }
        ready.wait()
        loop = created.withLock { $0! }
    }

    /// Stops the loop and joins the thread (whose exit tears the loop and its ports down).
    func finish() {
        loop.stop()
        thread.join()
    }
}

/// A thread running a Foundation `RunLoop` in its default mode until finished. `setUp`
/// runs first on the thread and adds the loop's sources; a far timer keeps the mode alive.
final class FoundationLoopThread: @unchecked Sendable {
    private final class Shared: @unchecked Sendable {
        let stopRequested = Atomic<Bool>(false)
        /// Written on the thread before `ready` is signalled, read after.
        var runLoop: RunLoop?
    }

    private let shared = Shared()
    private let thread: JoinableThread

    init(cpu: Int? = Placement.pair, setUp: @escaping @Sendable () -> Void) {
        let ready = DispatchSemaphore(value: 0)
        let shared = shared
        thread = JoinableThread.start(cpu: cpu) {
            let runLoop = RunLoop.current
            // Not `Timer(timeInterval:repeats:)`: on Linux it fires at once (its fire date is now).
            let keepAlive = Timer(fire: Date(timeIntervalSinceNow: 1e7), interval: 0, repeats: false) { _ in }
            runLoop.add(keepAlive, forMode: .default)
            setUp()
            shared.runLoop = runLoop
            ready.signal()
            while !shared.stopRequested.load(ordering: .acquiring) {
                _ = runLoop.run(mode: .default, before: Date(timeIntervalSinceNow: 0.1))
            }
            keepAlive.invalidate()
        }
        ready.wait()
    }

    /// The thread's run loop (for `perform` and adding timers from other threads).
    var runLoop: RunLoop { shared.runLoop! }

    /// Asks the loop to end (it notices within 0.1 s) and joins the thread.
    func finish() {
        shared.stopRequested.store(true, ordering: .releasing)
        thread.join()
    }
}
