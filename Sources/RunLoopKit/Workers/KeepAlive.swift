import RunLoopCore
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
/// A worker's keep-alive is made with its loop on the creating thread, before the worker's
/// thread runs (`init(for:)`), and installed on that thread (`install()`), so that a stop
/// can reach it at any time: an exit requested before the install is seen by the
/// resident run before its first pass.
///
/// Thread safety: `init(for:)`, `requestExit()` and `isExitRequested` from any thread;
/// `init(on:)`, `install()`, `runUntilExitRequested` and `remove()` on the loop's thread.
final class KeepAlive: @unchecked Sendable {
    private let exitRequested = Atomic<Bool>(false)
    /// The loop it keeps alive; woken directly, so that an exit requested before the
    /// source is installed (and bound to the loop) still makes the loop's next sleep return.
    private let loop: ThreadRunLoop
    /// Set once in `init`, before the object is shared.
    private var source: InputSource?

    /// Makes the source for `loop` without adding it: `install()` does, on the loop's
    /// thread. Any thread.
    init(for loop: ThreadRunLoop) {
        self.loop = loop
        source = InputSource { [weak self] in self?.performed() }
    }

    /// Makes the source and adds it to `loop`'s default mode. Loop thread.
    convenience init(on loop: ThreadRunLoop) {
        self.init(for: loop)
        install()
    }

    /// Adds the source to the loop's default mode. Once, on the loop's thread.
    func install() {
        if let source { loop.add(source, to: .default) }
    }

    var isExitRequested: Bool { exitRequested.load(ordering: .acquiring) }

    /// Makes the resident run return and not start again. Any thread.
    func requestExit() {
        exitRequested.store(true, ordering: .releasing)
        source?.signal()
        loop.wakeUp()
    }

    /// Runs `loop` in its default mode until `requestExit()`, or until a run fails (the
    /// kernel refused the loop's poll set or wait, logged by the run): running again would
    /// only spin on the same refusal. Loop thread.
    func runUntilExitRequested(_ loop: ThreadRunLoop) {
        while !isExitRequested {
            let result = loop.run(mode: .default, until: .distantFuture, returnAfterSourceHandled: true)
            if case .failed = result { return }
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
        guard loop.runDepth > 1 else { return }
        source?.signal()
        loop.stop()
    }
}
