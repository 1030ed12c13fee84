import RunLoopSystem
import Dispatch

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

    private let lock = Lock()
    // Unchecked: under lock, each access short, on every perform; see architecture.md,
    // exclusivity checks.
    @exclusivity(unchecked) private var currentState = State.pending // protected by lock
    @exclusivity(unchecked) private var work: (() -> Void)? // protected by lock; dropped once run or cancelled
    /// The one-shot timer of a delayed request; set before the request is published.
    var timer: LoopTimer?
    /// Signalled once the request is done or cancelled.
    private let finished = DispatchSemaphore(value: 0)

    package init(modes: [LoopMode], tag: String?, work: @escaping () -> Void) {
        self.modes = modes
        self.tag = tag
        self.work = work
    }

    public var state: State { lock.withLock { currentState } }

    /// Cancels the request if it has not started; returns whether it was cancelled by this call.
    @discardableResult
    public func cancel() -> Bool {
        let cancelled = lock.withLock {
            guard currentState == .pending else { return false }
            currentState = .cancelled
            work = nil
            return true
        }
        guard cancelled else { return false }
        timer?.invalidate()
        finished.signal()
        return true
    }

    /// Runs the work if still pending. Loop thread.
    package func run() -> Bool {
        let taken: (() -> Void)? = lock.withLock {
            guard currentState == .pending else { return nil }
            currentState = .running
            defer { work = nil }
            return work
        }
        guard let taken else { return false }
        taken()
        lock.withLock { currentState = .done }
        finished.signal()
        return true
    }

    /// Blocks until the request is done or cancelled; returns which.
    @usableFromInline
    package func waitUntilFinished() -> State {
        finished.wait()
        finished.signal() // let any other waiter through too
        return state
    }

    /// Whether the request may still run in `mode`; `modeIsCommon` says whether `mode` is
    /// in the loop's common modes.
    func isPending(for mode: LoopMode, modeIsCommon: Bool) -> Bool {
        guard state == .pending else { return false }
        return mayRun(in: mode, modeIsCommon: modeIsCommon)
    }

    /// Whether `mode` is one of the request's modes (whatever its state): its modes never
    /// change, so this takes no lock.
    func mayRun(in mode: LoopMode, modeIsCommon: Bool) -> Bool {
        for requested in modes where requested == mode || (modeIsCommon && requested == .common) { return true }
        return false
    }
}
