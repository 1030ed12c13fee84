import RunLoopSystem
import Synchronization

/// A closure queued to run on a run loop's thread (the guide's perform-selector source),
/// now or after a delay. Cancel it with `cancel()` while it is still pending.
///
/// Thread safety: every member may be used from any thread.
public final class PerformRequest: @unchecked Sendable {
    public enum State: Sendable, Equatable {
        case pending
        case running
        case done
        case cancelled
    }

    /// The tag given at creation, for `cancelPerformRequests(tagged:)`.
    public let tag: String?
    /// The modes in which the request may run.
    public let modes: [LoopMode]

    /// `State`'s code. A request leaves `.pending` once, by the compare-exchange of `run()`
    /// or `cancel()`: no lock (nor its two allocations) per request.
    private let currentState = Atomic<UInt8>(Code.pending)
    /// Set before the request is published; afterwards touched only by the one thread whose
    /// compare-exchange took the request out of `.pending`, which drops it (run or cancelled).
    private var work: (() -> Void)?
    /// The one-shot timer of a delayed request; set before the request is published.
    var timer: LoopTimer?
    /// Opened once the request is done or cancelled (after `run()` or `cancel()` took it
    /// out of `.pending`), by the thread that holds it as it does.
    private let finished = OnceGate()

    package init(modes: [LoopMode], tag: String?, work: @escaping () -> Void) {
        self.modes = modes
        self.tag = tag
        self.work = work
    }

    public var state: State {
        switch currentState.load(ordering: .acquiring) {
        case Code.pending: .pending
        case Code.running: .running
        case Code.done: .done
        default: .cancelled
        }
    }

    private enum Code {
        static let pending: UInt8 = 0, running: UInt8 = 1, done: UInt8 = 2, cancelled: UInt8 = 3
    }

    /// Takes the request out of `.pending` into `next`; false if it had already left it.
    private func leavePending(for next: UInt8) -> Bool {
        currentState.compareExchange(expected: Code.pending, desired: next, ordering: .acquiringAndReleasing).exchanged
    }

    /// Cancels the request if it has not started; returns whether it was cancelled by this call.
    @discardableResult
    public func cancel() -> Bool {
        guard leavePending(for: Code.cancelled) else { return false }
        work = nil
        timer?.invalidate()
        finished.open()
        return true
    }

    /// Runs the work if still pending. Loop thread.
    package func run() -> Bool {
        guard leavePending(for: Code.running) else { return false }
        let taken = work
        work = nil
        taken?()
        currentState.store(Code.done, ordering: .releasing)
        finished.open()
        return true
    }

    /// Blocks until the request is done or cancelled; returns which.
    @usableFromInline
    package func waitUntilFinished() -> State {
        finished.wait()
        return state
    }

    /// Whether the request may still run in `mode`; `modeIsCommon` says whether `mode` is
    /// in the loop's common modes.
    func isPending(for mode: LoopMode, modeIsCommon: Bool) -> Bool {
        guard state == .pending else { return false }
        return mayRun(in: mode, modeIsCommon: modeIsCommon)
    }

    /// Whether `mode` is one of the request's modes (whatever its state): its modes never
    /// change, so this reads no state.
    func mayRun(in mode: LoopMode, modeIsCommon: Bool) -> Bool {
        for requested in modes where requested == mode || (modeIsCommon && requested == .common) { return true }
        return false
    }
}
