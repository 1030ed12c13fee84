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

/// Many words at once (`futex_waitv(2)`, Linux 5.16): one thread sleeps on up to
/// `maximumWaitedWords`, shared and private alike, until any of them is woken.
extension Kernel {
    /// The kernel's limit on the words of one `futex_waitv` (`FUTEX_WAITV_MAX`).
    package static let maximumWaitedWords = 128

    /// One word to sleep on, and the value it must hold for the sleep to begin.
    package typealias WaitedWord = clinux_futex_waitv

    /// A word of another process's memory (a shared mapping), or of this process's.
    package static func waitedWord(_ word: UnsafeMutablePointer<UInt32>, while expected: UInt32,
                                   shared: Bool) -> WaitedWord {
        WaitedWord(value: UInt64(expected), address: UInt64(UInt(bitPattern: word)),
                   flags: shared ? clinux_futex2_shared_u32 : clinux_futex2_private_u32, reserved: 0)
    }

    /// Sleeps while every word holds its value, until one is woken or `deadline` passes.
    /// Returns false at the deadline; true when woken or when a word no longer held its
    /// value (the caller reads them all again: a wake-up may be spurious). Interrupted
    /// sleeps go on. `notImplemented` on a kernel before 5.16.
    package static func waitOnWords(_ words: UnsafeMutableBufferPointer<WaitedWord>,
                                    before deadline: Deadline) throws(SystemCallError) -> Bool {
        try futexWait("futex_waitv") {
            clinux_futex_waitv(words.baseAddress, UInt32(words.count), deadline.rawValue) >= 0 ? 0 : -1
        }
    }
}

/// Robust locks: a `pthread_mutex_t` in a shared mapping that the kernel itself releases,
/// setting `robustOwnerDied` in its word, the moment its holder thread ends, killed or not,
/// before that thread's process is torn down (`set_robust_list(2)`). Other processes read
/// the word (its low 30 bits are the holder's thread id) and sleep on it as a shared futex.
extension Kernel {
    /// Set in a robust lock's word by the kernel when its holder ended holding it.
    package static let robustOwnerDied: UInt32 = 0x4000_0000
    /// Set in a lock's word by a thread that sleeps on it: the holder's release wakes one.
    package static let robustWaiters: UInt32 = 0x8000_0000
    /// The holder's thread id in a lock's word.
    package static let robustThreadMask: UInt32 = 0x3FFF_FFFF

    /// Makes `lock` a robust lock that several processes share.
    package static func makeRobustLock(_ lock: UnsafeMutablePointer<pthread_mutex_t>) throws(SystemCallError) {
        let rc = clinux_robust_mutex_init(lock)
        guard rc == 0 else { throw SystemCallError(call: "pthread_mutex_init(robust, shared)", errno: rc) }
    }

    /// Takes `lock` for the calling thread, which must release it (`releaseRobustLock`)
    /// before the lock's memory is unmapped: until then it is on the thread's robust list.
    package static func takeRobustLock(_ lock: UnsafeMutablePointer<pthread_mutex_t>) throws(SystemCallError) {
        let rc = pthread_mutex_lock(lock)
        guard rc == 0 else { throw SystemCallError(call: "pthread_mutex_lock(robust)", errno: rc) }
    }

    /// Releases `lock`, taken by the calling thread.
    package static func releaseRobustLock(_ lock: UnsafeMutablePointer<pthread_mutex_t>) throws(SystemCallError) {
        let rc = pthread_mutex_unlock(lock)
        guard rc == 0 else { throw SystemCallError(call: "pthread_mutex_unlock(robust)", errno: rc) }
    }
}
