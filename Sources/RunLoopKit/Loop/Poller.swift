import CLinuxPoll
import Glibc
import Synchronization

/// The poll set a run loop sleeps in (step 7 of the pass): an epoll instance holding a
/// wake-up eventfd and the descriptors of the loop's port sources, waited on with a
/// nanosecond deadline (`epoll_pwait2`).
///
/// Thread safety: `wake()` and `isSleeping` may be used from any thread; everything
/// else only from the loop's thread.
final class Poller: @unchecked Sendable {
    /// The token reported for the wake-up eventfd; port sources use tokens from 1 up.
    static let wakeToken: UInt64 = 0

    private let epollFD: Int32
    private let wakeFD: Int32

    /// Sleep/wake handshake: `sleeping` is set by the loop as it commits to sleep,
    /// `wakePending` by `wake()`. Atomic, shared with waking threads.
    private let state = Atomic<UInt8>(0)
    private static let sleeping: UInt8 = 1
    private static let wakePending: UInt8 = 2

    /// Whether `epoll_pwait2` exists on this kernel; loop thread only.
    private var preciseWaitAvailable = true
    /// Reused buffer of ready events; loop thread only.
    private var events = [epoll_event](repeating: epoll_event(), count: 64)

    init() throws(SystemCallError) {
        epollFD = try systemCall("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        do {
            wakeFD = try systemCall("eventfd") { eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK)) }
        } catch {
            close(epollFD)
            throw error
        }
        do {
            try register(wakeFD, token: Poller.wakeToken)
        } catch {
            close(wakeFD)
            close(epollFD)
            throw error
        }
    }

    deinit {
        close(wakeFD)
        close(epollFD)
    }

    /// Adds a descriptor, reported with `token` when readable (level-triggered), via `epoll_ctl(EPOLL_CTL_ADD)`.
    func register(_ fd: Int32, token: UInt64) throws(SystemCallError) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = token
        try systemCall("epoll_ctl(ADD)") { epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) }
    }

    /// Removes a descriptor, via `epoll_ctl(EPOLL_CTL_DEL)`.
    func deregister(_ fd: Int32) throws(SystemCallError) {
        var event = epoll_event()
        try systemCall("epoll_ctl(DEL)") { epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, &event) }
    }

    /// True while the loop's thread is committed to sleeping in `wait`. Any thread.
    var isSleeping: Bool { state.load(ordering: .acquiring) & Poller.sleeping != 0 }

    /// Makes the loop's current or next wait return at once. Any thread.
    ///
    /// Writes the eventfd only when the loop is asleep; a loop that is awake sees the
    /// pending flag before it commits to sleeping, so no wake-up is lost.
    func wake() {
        let old = state.bitwiseOr(Poller.wakePending, ordering: .acquiringAndReleasing).oldValue
        guard old == Poller.sleeping else { return }
        var one: UInt64 = 1
        _ = try? systemCall("write(eventfd)") { write(wakeFD, &one, 8) }
    }

    /// Waits until a registered descriptor is ready, `deadline` passes or `wake()` is called,
    /// then calls `ready` with the token of each ready port descriptor. With `poll` set it
    /// only looks, without sleeping.
    func wait(until deadline: Deadline, poll: Bool, ready: (UInt64) -> Void) throws(SystemCallError) {
        // Commit to sleep only if no wake-up is pending; otherwise just look.
        let committed = !poll && state.compareExchange(
            expected: 0, desired: Poller.sleeping, ordering: .acquiringAndReleasing
        ).exchanged
        let count = try waitForEvents(until: committed ? deadline : Deadline(rawValue: 0))
        state.store(0, ordering: .releasing)
        for index in 0..<count {
            let token = events[index].data.u64
            if token == Poller.wakeToken {
                drainWakeFD()
            } else {
                ready(token)
            }
        }
    }

    /// `epoll_pwait2` with a nanosecond timeout, falling back to `epoll_wait` rounded up
    /// to whole milliseconds (never early) where the kernel lacks it. The time left is
    /// computed afresh on each attempt, so a signal (`EINTR`) never stretches the wait.
    private func waitForEvents(until deadline: Deadline) throws(SystemCallError) -> Int {
        let capacity = Int32(events.count)
        let infinite = deadline == .distantFuture
        func remaining() -> UInt64 {
            let now = Deadline.now()
            return deadline > now ? deadline.rawValue - now.rawValue : 0
        }
        if preciseWaitAvailable {
            do {
                return Int(try systemCall("epoll_pwait2") {
                    let left = remaining()
                    var timeout = timespec(tv_sec: Int(left / 1_000_000_000), tv_nsec: Int(left % 1_000_000_000))
                    return events.withUnsafeMutableBufferPointer { buffer in
                        infinite
                            ? epoll_pwait2(epollFD, buffer.baseAddress, capacity, nil, nil)
                            : epoll_pwait2(epollFD, buffer.baseAddress, capacity, &timeout, nil)
                    }
                })
            } catch where error.errno == ENOSYS {
                preciseWaitAvailable = false
            }
        }
        return Int(try systemCall("epoll_wait") {
            let milliseconds = infinite ? -1 : Int32(clamping: (remaining() + 999_999) / 1_000_000)
            return events.withUnsafeMutableBufferPointer { buffer in
                epoll_wait(epollFD, buffer.baseAddress, capacity, milliseconds)
            }
        })
    }

    private func drainWakeFD() {
        var value: UInt64 = 0
        _ = read(wakeFD, &value, 8) // EAGAIN is fine: a late writer's count is read next time.
    }
}
