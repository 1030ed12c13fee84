import CLinuxPoll
import Glibc

/// Words in memory that other processes map too (a memory file's shared mapping), on which
/// a thread of one process sleeps until a thread of another changes them: futexes keyed by
/// the memory, not by the process (no `FUTEX_PRIVATE_FLAG`), each call through `systemCall`.
extension Kernel {
    /// Sleeps while `*word` holds `expected`, until another thread (of any process mapping
    /// the word) wakes it (`wakeSharedWord`) or `deadline` passes. Returns false at the
    /// deadline; true when woken or when the word no longer held `expected` (the caller
    /// reads it again: a wake-up may be spurious). Interrupted sleeps go on.
    package static func waitOnSharedWord(_ word: UnsafeMutablePointer<UInt32>, while expected: UInt32,
                                         before deadline: Deadline) throws(SystemCallError) -> Bool {
        try futexWait("futex(WAIT_BITSET, shared)") { clinux_futex_wait_shared(word, expected, deadline.rawValue) }
    }

    /// Wakes every thread sleeping on `word` in `waitOnSharedWord`, in any process; returns
    /// how many woke.
    @discardableResult
    package static func wakeSharedWord(_ word: UnsafeMutablePointer<UInt32>) -> Int {
        Int((try? systemCall("futex(WAKE, shared)") { clinux_futex_wake_shared(word) }) ?? 0)
    }
}

/// Words only this process's threads use (a loop's sleep, a gate's state): private futexes,
/// which the kernel keys by address in this process, each call through `systemCall`.
extension Kernel {
    /// Sleeps while `*word` holds `expected`, until another thread of this process wakes it
    /// (`wakeWord`) or `deadline` passes. Returns false at the deadline; true when woken or
    /// when the word no longer held `expected` (the caller reads it again: a wake-up may be
    /// spurious). Interrupted sleeps go on.
    package static func waitOnWord(_ word: UnsafeMutablePointer<UInt32>, while expected: UInt32,
                                   before deadline: Deadline) throws(SystemCallError) -> Bool {
        try futexWait("futex(WAIT_BITSET)") { clinux_futex_wait(word, expected, deadline.rawValue) }
    }

    /// Wakes one thread sleeping on `word` in `waitOnWord` (every one with `all`); returns
    /// how many woke.
    @discardableResult
    package static func wakeWord(_ word: UnsafeMutablePointer<UInt32>, all: Bool = false) -> Int {
        Int((try? systemCall("futex(WAKE)") { all ? clinux_futex_wake_all(word) : clinux_futex_wake(word) }) ?? 0)
    }
}

extension Kernel {
    /// A futex wait's outcome, as both kinds of word report it: false at the deadline
    /// (`ETIMEDOUT`), true when woken or when the word no longer held the value (`EAGAIN`).
    @inline(__always)
    private static func futexWait(_ call: String, _ wait: () -> Int32) throws(SystemCallError) -> Bool {
        do {
            try systemCall(call, wait)
            return true
        } catch where error.errno == ETIMEDOUT {
            return false
        } catch where error.code == .again {
            return true
        }
    }
}
