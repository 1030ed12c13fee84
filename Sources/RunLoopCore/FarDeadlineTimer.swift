import RunLoopSystem
import CLinuxPoll
import Glibc

/// A timerfd in a loop's poll set for deadlines far away, so that sleeping until one
/// arms no kernel timer per sleep.
///
/// A timeout given to `epoll_pwait2` starts and cancels a high-resolution timer on every
/// call: about a microsecond per sleep, which a requester waiting for replies with a
/// 5-second timeout pays on every request. Far deadlines instead arm this timerfd
/// (`timerfd_settime`, absolute on `CLOCK_MONOTONIC`) and the loop sleeps without a
/// timeout. A later sleep whose deadline is not before the armed one keeps it, so a
/// stream of requests re-arms it about once per timeout; when it fires before a sleep's
/// own deadline, `Poller` reads it, arms it anew and sleeps on, so the loop (and its
/// observers) never see that wake-up.
///
/// Loop thread only; made by `Poller` the first time a far deadline is slept on.
struct FarDeadlineTimer {
    /// The token reported for the timerfd; `DescriptorTable`'s tokens are never all ones.
    static let token: UInt64 = .max
    /// Deadlines at least this far away use the timer; nearer ones are given to the
    /// wait itself, exactly (timers, short timeouts).
    static let threshold: UInt64 = 10_000_000 // 10 ms

    let descriptor: Int32
    /// When the timer fires, if armed and not yet seen to fire.
    private var armed: Deadline?

    init() throws(SystemCallError) {
        descriptor = try systemCall("timerfd_create") {
            timerfd_create(CLOCK_MONOTONIC, Int32(TFD_CLOEXEC | TFD_NONBLOCK))
        }
    }

    /// Makes the timer fire at `deadline` or before: keeps an earlier arming.
    mutating func fire(atOrBefore deadline: Deadline) throws(SystemCallError) {
        if let armed, armed <= deadline { return }
        var value = itimerspec()
        value.it_value = timespec(tv_sec: Int(deadline.rawValue / 1_000_000_000),
                                  tv_nsec: Int(deadline.rawValue % 1_000_000_000))
        try systemCall("timerfd_settime") { timerfd_settime(descriptor, Int32(TFD_TIMER_ABSTIME), &value, nil) }
        armed = deadline
    }

    /// The timer fired: reads its count so that it is no longer readable.
    mutating func fired() {
        var count: UInt64 = 0
        _ = try? withUnsafeMutableBytes(of: &count) { try Kernel.read(descriptor, into: $0) } // EAGAIN is fine: it was read already
        armed = nil
    }

    func close() { Kernel.close(descriptor) }
}
