import Glibc

/// Timing for the benchmark: the monotonic clock in nanoseconds, and durations.
enum Clock {
    /// `clock_gettime(CLOCK_MONOTONIC)` in nanoseconds (the clock RunLoopKit schedules on).
    @inline(__always)
    static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }

    /// Seconds elapsed since `start` (a `now()` value).
    static func seconds(since start: UInt64) -> Double {
        Double(now() &- start) / 1e9
    }

    /// Sleeps the calling thread for `seconds`.
    static func sleep(seconds: Double) {
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
    }
}
