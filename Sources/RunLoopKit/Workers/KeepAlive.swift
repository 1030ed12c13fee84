import Synchronization

/// The input source that keeps a resident thread's run loop running, and ends that
/// resident run when asked to from any thread.
///
/// Seed 003's AFNetworking thread kept its loop alive with an unused `NSMachPort` and ran
/// `-[NSRunLoop run]`, which nothing can end. Here the loop runs the guide's Listing 3-2,
/// `run(mode: .default, before: .distantFuture)` in a loop that checks for exit after each
/// handled source; asking to exit sets the flag, signals this source and wakes the loop,
/// so the resident run returns after the current pass.
///
/// Thread safety: `requestExit()` and `isExitRequested` from any thread; `init`,
/// `runUntilExitRequested` and `remove()` on the loop's thread.
final class KeepAlive: @unchecked Sendable {
    private let exitRequested = Atomic<Bool>(false)
    /// Set once in `init`, before the object is shared.
    private var source: InputSource?

    /// Adds the source to `loop`'s default mode. Loop thread.
    init(on loop: ThreadRunLoop) {
        let source = InputSource { [weak self] in self?.performed() }
        self.source = source
        loop.add(source, to: .default)
    }

    var isExitRequested: Bool { exitRequested.load(ordering: .acquiring) }

    /// Makes the resident run return and not start again. Any thread.
    func requestExit() {
        exitRequested.store(true, ordering: .releasing)
        source?.signalAndWake()
    }

    /// Runs `loop` in its default mode until `requestExit()`. Loop thread.
    func runUntilExitRequested(_ loop: ThreadRunLoop) {
        while !isExitRequested {
            let result = loop.run(mode: .default, until: .distantFuture, returnAfterSourceHandled: true)
            // The source keeps the mode non-empty, so a finished run would mean a spinning loop.
            precondition(result != .finished, "a resident run loop lost its keep-alive source")
        }
    }

    /// Removes the source from the loop. Loop thread.
    func remove() { source?.invalidate() }

    /// The source's perform, on the loop's thread. In the resident run nothing is left to
    /// do: the run returns after this pass. But work may run the loop itself in the default
    /// mode (a nested run), which then takes the signal: that nested run is ended, and the
    /// signal kept for the resident run below it.
    private func performed() {
        guard isExitRequested else { return }
        let loop = ThreadRunLoop.current
        guard loop.runStack.count > 1 else { return }
        source?.signal()
        loop.stop()
    }
}
