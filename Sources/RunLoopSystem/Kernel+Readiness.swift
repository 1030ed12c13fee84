import CLinuxPoll
import Glibc

/// Readiness calls for a source that gathers several descriptors behind one: an epoll
/// instance, itself readable while one of the descriptors it watches is, so that a loop
/// watches the one and the source learns which of the others are ready. Each through
/// `systemCall`.
extension Kernel {
    /// `epoll_create1(2)`, close-on-exec; returns the new descriptor.
    package static func readinessDescriptor() throws(SystemCallError) -> Int32 {
        try systemCall("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
    }

    /// `epoll_ctl(2)` `EPOLL_CTL_ADD`: watches `fd` for reading, level-triggered, reported
    /// as `token` by `readyTokens`.
    package static func watchReadable(_ epoll: Int32, _ fd: Int32, token: UInt64) throws(SystemCallError) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = token
        _ = try systemCall("epoll_ctl(ADD)") { epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) }
    }

    /// `epoll_ctl(2)` `EPOLL_CTL_DEL`. Its error is not reported: a descriptor not watched
    /// (or already closed, which epoll forgets by itself) is not watched afterwards either.
    package static func unwatch(_ epoll: Int32, _ fd: Int32) {
        var event = epoll_event()
        _ = try? systemCall("epoll_ctl(DEL)") { epoll_ctl(epoll, EPOLL_CTL_DEL, fd, &event) }
    }

    /// The tokens of the descriptors `epoll` finds ready now, without waiting (`epoll_wait(2)`
    /// with a zero timeout; at most 8).
    package static func readyTokens(_ epoll: Int32) throws(SystemCallError) -> [UInt64] {
        var events = [epoll_event](repeating: epoll_event(), count: 8)
        let count = try systemCall("epoll_wait") { epoll_wait(epoll, &events, 8, 0) }
        return events.prefix(Int(count)).map(\.data.u64)
    }

    /// Whether `fd` is readable now (`poll(2)` with a zero timeout): for a pidfd, whether
    /// its process has ended.
    package static func isReadable(_ fd: Int32) throws(SystemCallError) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let count = try systemCall("poll") { poll(&entry, 1, 0) }
        return count == 1 && entry.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0
    }

    /// Waits until `fd` is readable (`poll(2)`), or `deadline` passes: false then. For a
    /// pidfd, until its process has ended.
    package static func waitUntilReadable(_ fd: Int32, before deadline: Deadline) throws(SystemCallError) -> Bool {
        while true {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let now = Deadline.now().rawValue
            guard now < deadline.rawValue else { return try isReadable(fd) }
            let milliseconds = Int32(clamping: (deadline.rawValue - now + 999_999) / 1_000_000)
            if try systemCall("poll", { poll(&entry, 1, milliseconds) }) == 1,
               entry.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                return true
            }
        }
    }

    /// `timerfd_create(2)` on `CLOCK_MONOTONIC` (`Deadline`'s clock), non-blocking and
    /// close-on-exec, disarmed: readable once armed and expired.
    package static func timerDescriptor() throws(SystemCallError) -> Int32 {
        try systemCall("timerfd_create") { timerfd_create(CLOCK_MONOTONIC, Int32(TFD_CLOEXEC | TFD_NONBLOCK)) }
    }

    /// `timerfd_settime(2)`: arms `timer` to expire once at `deadline` (absolute), or
    /// disarms it (nil). Either way it is no longer readable for an expiry before.
    package static func setTimer(_ timer: Int32, at deadline: Deadline?) throws(SystemCallError) {
        var value = itimerspec()
        if let deadline {
            let raw = max(deadline.rawValue, 1) // all zeros would disarm it
            value.it_value = timespec(tv_sec: Int(raw / 1_000_000_000), tv_nsec: Int(raw % 1_000_000_000))
        }
        _ = try systemCall("timerfd_settime") { timerfd_settime(timer, Int32(TFD_TIMER_ABSTIME), &value, nil) }
    }
}
