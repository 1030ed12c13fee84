import RunLoopSystem
import CLinuxPoll
import Glibc
import Synchronization

/// Where a run loop sleeps (step 7 of the pass), and how other threads wake it.
///
/// A loop without port sources sleeps on a futex: its sleep/wake handshake word itself,
/// with a nanosecond deadline (`FUTEX_WAIT_BITSET`, absolute on `CLOCK_MONOTONIC`). Once
/// a port descriptor is registered, it sleeps in a poll set (`PollSet`: epoll with a
/// wake-up eventfd, waited on with `epoll_pwait2`, or `epoll_wait` on a kernel without
/// it). So a worker that never holds a port makes no descriptor at all: no
/// `epoll_create1`, `eventfd`, `epoll_ctl` or `close` per thread, and a pass that only
/// looks (after handling a source) makes no system call.
///
/// Thread safety: `wake()` and `isSleeping` may be used from any thread; everything
/// else only from the loop's thread.
package final class Poller: @unchecked Sendable {
    /// The token reported for the wake-up eventfd; `DescriptorTable`'s tokens are never 0.
    static let wakeToken: UInt64 = PollSet.wakeToken

    /// The sleep/wake handshake, shared with waking threads (atomic), and the futex word a
    /// loop without a poll set sleeps on. The loop sets a sleeping bit as it commits to
    /// sleep (which one says where it sleeps), `wake()` sets `wakePending`. Allocated, so
    /// that its address is stable for the kernel.
    private let state: UnsafeMutablePointer<Atomic<UInt32>>
    private static let sleepingOnFutex: UInt32 = 1
    private static let wakePending: UInt32 = 2
    private static let sleepingInPollSet: UInt32 = 4

    /// Made by the first `register`, on the loop's thread, and never changed after (until
    /// deinit). Wakers read it only after seeing `sleepingInPollSet`, which the loop sets
    /// (releasing) after making it.
    private var pollSet: PollSet?
    // Unchecked below: loop thread only, read on every sleep; see architecture.md.
    /// Makes the poll set wait with `epoll_wait`'s millisecond timeout, as on a kernel
    /// without `epoll_pwait2` (tests of the fallback). Loop thread only.
    @exclusivity(unchecked) package var forcesMillisecondWaits = false
    /// Waits made with `epoll_wait`'s millisecond timeout, and those of them that returned
    /// with nothing ready before their deadline (a timeout rounded down would). Loop thread only.
    @exclusivity(unchecked) package private(set) var millisecondWaits = 0
    @exclusivity(unchecked) package private(set) var millisecondWaitsEndedEarly = 0
    /// Reused buffer of ready events, allocated with the poll set; loop thread only.
    @exclusivity(unchecked) private var events: [epoll_event] = []
    /// Wakes the poll set for far deadlines; made on first use, loop thread only. Armed
    /// before every sleep of a requester.
    @exclusivity(unchecked) private var farDeadlineTimer: FarDeadlineTimer?

    /// Whether the loop's thread sleeps with 1 µs of timer slack yet: set before the first
    /// sleep with a deadline, since only a timed sleep has slack. Loop thread only.
    @exclusivity(unchecked) private var hasFineTimerSlack = false

    /// The far-deadline timer's timerfd, once made, for tests that read it back from the
    /// kernel. Loop thread only.
    package var farDeadlineTimerDescriptor: Int32? { farDeadlineTimer?.descriptor }

    init() {
        state = .allocate(capacity: 1)
        state.initialize(to: Atomic(0))
    }

    deinit {
        farDeadlineTimer?.close()
        pollSet?.close()
        state.deinitialize(count: 1)
        state.deallocate()
    }

    /// Adds a descriptor, reported with `token` when one of `events` (epoll's bits) is
    /// ready, level-triggered, via `epoll_ctl(EPOLL_CTL_ADD)`; the first one makes the poll set.
    func register(_ fd: Int32, token: UInt64, events: UInt32) throws(SystemCallError) {
        try madePollSet().register(fd, token: token, events: events)
    }

    /// Makes the poll set (an epoll instance and its wake-up eventfd) if the loop has none
    /// yet, so that the descriptors it needs are taken now: a port is created with its
    /// loop's poll set, and fails there, with `EMFILE`, at the descriptor limit. Loop thread only.
    package func preparePollSet() throws(SystemCallError) {
        _ = try madePollSet()
    }

    private func madePollSet() throws(SystemCallError) -> PollSet {
        if let pollSet { return pollSet }
        let made = try PollSet()
        events = [epoll_event](repeating: epoll_event(), count: 64)
        pollSet = made
        return made
    }

    /// Changes what a registered descriptor is watched for, via `epoll_ctl(EPOLL_CTL_MOD)`.
    func modify(_ fd: Int32, token: UInt64, events: UInt32) throws(SystemCallError) {
        guard let pollSet else { throw SystemCallError(call: "epoll_ctl(MOD)", errno: ENOENT) }
        try pollSet.modify(fd, token: token, events: events)
    }

    /// Removes a descriptor, via `epoll_ctl(EPOLL_CTL_DEL)`.
    func deregister(_ fd: Int32) throws(SystemCallError) {
        guard let pollSet else { throw SystemCallError(call: "epoll_ctl(DEL)", errno: ENOENT) }
        try pollSet.deregister(fd)
    }

    /// True while the loop's thread is committed to sleeping in `wait`. Any thread.
    var isSleeping: Bool {
        state.pointee.load(ordering: .acquiring) & (Poller.sleepingOnFutex | Poller.sleepingInPollSet) != 0
    }

    /// Makes the loop's current or next wait return at once. Any thread.
    ///
    /// Wakes the futex or writes the eventfd only when the loop is asleep; a loop that is
    /// awake sees the pending flag before it commits to sleeping, so no wake-up is lost.
    package func wake() {
        let old = state.pointee.bitwiseOr(Poller.wakePending, ordering: .acquiringAndReleasing).oldValue
        switch old {
        case Poller.sleepingOnFutex: Kernel.wakeWord(futexWord)
        case Poller.sleepingInPollSet: pollSet?.wake()
        default: break
        }
    }

    /// Waits until a registered descriptor is ready, `deadline` passes or `wake()` is called,
    /// and returns how many registered descriptors are ready: `readyDescriptor(at:)` gives
    /// the token and the ready events (epoll's bits) of each, until the next wait. With
    /// `poll` set it only looks, without sleeping. (Read back, not handed to a closure:
    /// hot-path: borrow-not-copy (docs/optimization-tips.md).)
    func wait(until deadline: Deadline, poll: Bool) throws(SystemCallError) -> Int {
        if !poll && !hasFineTimerSlack && deadline != .distantFuture { setFineTimerSlack() }
        guard let pollSet else {
            // No descriptors to look at: only a sleep, if no wake-up is pending.
            defer { state.pointee.store(0, ordering: .releasing) }
            if !poll && commitToSleep(Poller.sleepingOnFutex) { try sleepOnFutex(until: deadline) }
            return 0
        }
        while true {
            // A far deadline arms the timerfd instead of a timeout (see `FarDeadlineTimer`);
            // armed before the commit, so that nothing can fail between the commit and the wait.
            // Where the timer cannot be had (no descriptor left), the wait takes the deadline.
            let far = !poll && deadline != .distantFuture
                && deadline.rawValue > Deadline.now().rawValue + FarDeadlineTimer.threshold
                && armFarDeadlineTimer(atOrBefore: deadline, in: pollSet)
            // Commit to sleep only if no wake-up is pending; otherwise just look.
            let committed = !poll && commitToSleep(Poller.sleepingInPollSet)
            let waitUntil = !committed ? Deadline(rawValue: 0) : far ? .distantFuture : deadline
            let count: Int
            do {
                let waited = try pollSet.waitForEvents(until: waitUntil, into: &events, millisecondsOnly: forcesMillisecondWaits)
                count = waited.count
                if waited.inMilliseconds { countMillisecondWait(until: waitUntil, count: count) }
            } catch {
                state.pointee.store(0, ordering: .releasing)
                throw error
            }
            state.pointee.store(0, ordering: .releasing)
            let found = Poller.partition(&events, count: count)
            if found.wokenUp { pollSet.drainWakeUps() }
            if found.timerFired { farDeadlineTimer?.fired() }
            // The timerfd kept an earlier sleep's deadline and fired before this one's: that
            // is nobody's event, so sleep on (re-armed) rather than wake the loop for nothing.
            let onlyTheTimerFired = found.timerFired && !found.wokenUp && found.ready == 0
            guard committed, onlyTheTimerFired, Deadline.now() < deadline else { return found.ready }
        }
    }

    /// Sorts the first `count` of a wait's `events`: the registered descriptors' move to
    /// the front, in order, and their number is `ready`; the wake-up descriptor's and the
    /// far-deadline timer's are only noted.
    @inline(__always)
    static func partition(_ events: inout [epoll_event], count: Int) -> (ready: Int, wokenUp: Bool, timerFired: Bool) {
        var ready = 0
        var wokenUp = false
        var timerFired = false
        for index in 0..<count {
            switch events[index].data.u64 {
            case Poller.wakeToken: wokenUp = true
            case FarDeadlineTimer.token: timerFired = true
            default:
                events[ready] = events[index]
                ready += 1
            }
        }
        return (ready, wokenUp, timerFired)
    }

    /// The token and the ready events (epoll's bits) of the `index`th descriptor the last
    /// `wait` found ready (`index` below what it returned).
    func readyDescriptor(at index: Int) -> (token: UInt64, events: UInt32) {
        (events[index].data.u64, events[index].events)
    }

    /// Arms the far-deadline timer, making it and adding it to the poll set the first time.
    /// Returns false if the timer cannot be made, added or armed (at the descriptor limit,
    /// say): the sleep then gives its deadline to the wait itself, as for a near one.
    private func armFarDeadlineTimer(atOrBefore deadline: Deadline, in pollSet: PollSet) -> Bool {
        do throws(SystemCallError) {
            if farDeadlineTimer == nil {
                let timer = try FarDeadlineTimer()
                do {
                    try pollSet.register(timer.descriptor, token: FarDeadlineTimer.token, events: EPOLLIN.rawValue)
                } catch {
                    timer.close()
                    throw error
                }
                farDeadlineTimer = timer
            }
            try farDeadlineTimer?.fire(atOrBefore: deadline)
            return true
        } catch {
            return false
        }
    }

    private func countMillisecondWait(until deadline: Deadline, count: Int) {
        millisecondWaits += 1
        if count == 0 && deadline != .distantFuture && Deadline.now() < deadline { millisecondWaitsEndedEarly += 1 }
    }

    /// Timers say how late they may fire (tolerance), so the kernel's own slack (50 µs by
    /// default) would only make them later: a loop's thread sleeps with 1 µs of slack. Set
    /// once, on the loop's thread, before its first timed sleep (a thread whose loop only
    /// ever sleeps without a deadline, a worker's between perform requests, makes no `prctl`).
    @inline(never)
    private func setFineTimerSlack() {
        hasFineTimerSlack = true
        try? Kernel.setTimerSlack(.microseconds(1)) // EINVAL only for a negative slack
    }

    /// Sets `sleeping` if no wake-up is pending; returns whether it did.
    private func commitToSleep(_ sleeping: UInt32) -> Bool {
        state.pointee.compareExchange(expected: 0, desired: sleeping, ordering: .acquiringAndReleasing).exchanged
    }

    /// Sleeps on the state word while it still says `sleepingOnFutex` (no wake-up since the
    /// commit), until `deadline`. A spurious return or a signal (`EINTR`) only makes it
    /// check the word again; the deadline is absolute, so it never stretches.
    private func sleepOnFutex(until deadline: Deadline) throws(SystemCallError) {
        while state.pointee.load(ordering: .acquiring) == Poller.sleepingOnFutex {
            guard try Kernel.waitOnWord(futexWord, while: Poller.sleepingOnFutex, before: deadline) else { return }
        }
    }

    /// The state word's address, as the kernel's futex calls take it.
    private var futexWord: UnsafeMutablePointer<UInt32> {
        UnsafeMutableRawPointer(state).assumingMemoryBound(to: UInt32.self)
    }
}
