import RunLoopSystem
import CLinuxPoll
import Glibc
import Synchronization

/// The epoll instance a loop with port sources sleeps in, with the eventfd that wakes it:
/// made by `Poller` when the loop's first port descriptor is registered, so that a loop
/// without ports (a plain worker's) never creates or closes either descriptor.
///
/// Thread safety: `wake()` from any thread that saw the loop commit to sleep in it (after
/// `init`, the descriptors never change until `close()`); everything else on the loop's thread.
struct PollSet {
    /// The token reported for the wake-up eventfd; `DescriptorTable`'s tokens are never 0.
    static let wakeToken: UInt64 = 0

    private let epollFD: Int32
    private let wakeFD: Int32

    init() throws(SystemCallError) {
        epollFD = try systemCall("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        do {
            wakeFD = try systemCall("eventfd") { eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK)) }
        } catch {
            Kernel.close(epollFD)
            throw error
        }
        do {
            try PollSet.control(EPOLL_CTL_ADD, "epoll_ctl(ADD)", wakeFD, token: PollSet.wakeToken,
                                events: EPOLLIN.rawValue, in: epollFD)
        } catch {
            Kernel.close(wakeFD)
            Kernel.close(epollFD)
            throw error
        }
    }

    /// Closes both descriptors; once, when the loop's poller goes.
    func close() {
        Kernel.close(wakeFD)
        Kernel.close(epollFD)
    }

    /// Adds a descriptor, reported with `token` when one of `events` (epoll's bits) is
    /// ready, level-triggered, via `epoll_ctl(EPOLL_CTL_ADD)`.
    func register(_ fd: Int32, token: UInt64, events: UInt32) throws(SystemCallError) {
        try PollSet.control(EPOLL_CTL_ADD, "epoll_ctl(ADD)", fd, token: token, events: events, in: epollFD)
    }

    /// Changes what a registered descriptor is watched for, via `epoll_ctl(EPOLL_CTL_MOD)`.
    func modify(_ fd: Int32, token: UInt64, events: UInt32) throws(SystemCallError) {
        try PollSet.control(EPOLL_CTL_MOD, "epoll_ctl(MOD)", fd, token: token, events: events, in: epollFD)
    }

    /// Removes a descriptor, via `epoll_ctl(EPOLL_CTL_DEL)`.
    func deregister(_ fd: Int32) throws(SystemCallError) {
        var event = epoll_event()
        try systemCall("epoll_ctl(DEL)") { epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, &event) }
    }

    /// Makes the loop's sleep in the set return. Any thread.
    func wake() {
        var one: UInt64 = 1
        _ = try? systemCall("write(eventfd)") { write(wakeFD, &one, 8) }
    }

    /// Reads the wake-up count, so that the eventfd is no longer readable.
    func drainWakeUps() {
        var value: UInt64 = 0
        // EAGAIN is fine: a late writer's count is read next time.
        _ = try? withUnsafeMutableBytes(of: &value) { try Kernel.read(wakeFD, into: $0) }
    }

    /// Whether this kernel has `epoll_pwait2` (Linux 5.11): learnt once per process, at
    /// the first wait that finds out, and kept. Any thread (atomic).
    private static let preciseWaitMissing = Atomic<Bool>(false)

    /// Whether a wait of this process found `epoll_pwait2` missing. Any thread.
    package static var isPreciseWaitMissing: Bool { preciseWaitMissing.load(ordering: .relaxed) }

    /// `epoll_pwait2` with a nanosecond timeout (through `syscall(2)`, see
    /// `clinux_epoll_pwait2`), falling back to `epoll_wait` rounded up to whole
    /// milliseconds (never early) where the kernel lacks it (`ENOSYS`, remembered for the
    /// process) or when `millisecondsOnly` forces the fallback (tests). Fills `events`;
    /// returns how many are ready, and whether the fallback was used. The time left is
    /// computed afresh on each attempt, so a signal (`EINTR`) never stretches the wait.
    func waitForEvents(until deadline: Deadline, into events: inout [epoll_event],
                       millisecondsOnly: Bool) throws(SystemCallError) -> (count: Int, inMilliseconds: Bool) {
        let capacity = Int32(events.count)
        let infinite = deadline == .distantFuture
        func remaining() -> UInt64 {
            let now = Deadline.now()
            return deadline > now ? deadline.rawValue - now.rawValue : 0
        }
        if !millisecondsOnly && !PollSet.preciseWaitMissing.load(ordering: .relaxed) {
            do {
                let count = try systemCall("epoll_pwait2") {
                    let timeout = infinite ? -1 : Int64(clamping: remaining())
                    return events.withUnsafeMutableBufferPointer { buffer in
                        clinux_epoll_pwait2(epollFD, buffer.baseAddress, capacity, timeout)
                    }
                }
                return (Int(count), false)
            } catch where error.errno == ENOSYS {
                PollSet.preciseWaitMissing.store(true, ordering: .relaxed)
            }
        }
        let count = try systemCall("epoll_wait") {
            let milliseconds = infinite ? -1 : Int32(clamping: (remaining() + 999_999) / 1_000_000)
            return events.withUnsafeMutableBufferPointer { buffer in
                epoll_wait(epollFD, buffer.baseAddress, capacity, milliseconds)
            }
        }
        return (Int(count), true)
    }

    private static func control(_ operation: Int32, _ name: StaticString, _ fd: Int32, token: UInt64,
                                events: UInt32, in epollFD: Int32) throws(SystemCallError) {
        var event = epoll_event()
        event.events = events
        event.data.u64 = token
        try systemCall("\(name)") { epoll_ctl(epollFD, operation, fd, &event) }
    }
}
