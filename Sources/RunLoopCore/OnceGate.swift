import RunLoopSystem
import Synchronization

/// A gate opened once, at which any number of threads wait until it is: a request's
/// waiters until it is done or cancelled, a worker's creator until its set-up ran, its
/// stoppers until it is joined. One futex word, not a `DispatchSemaphore` (a Swift object
/// and a libdispatch one made and destroyed each time, about 600 instructions).
///
/// The word says `closed`, `waited` (a waiter is asleep or about to sleep) or `open`. A
/// waiter compare-exchanges closed → waited and sleeps with a private futex wait while the
/// word says waited; `open()` exchanges it to open and wakes every waiter only if one said
/// it sleeps. Nothing spins: a waiter woken spuriously, or that finds the word changed,
/// looks again and sleeps again. The word is allocated, so that its address is stable for
/// the kernel; whoever calls `open()` must hold the gate's owner while it does, so that
/// the word outlives the wake-up.
///
/// Thread safety: every member from any thread.
package struct OnceGate: ~Copyable, @unchecked Sendable {
    private let word: UnsafeMutablePointer<Atomic<UInt32>>
    private static let closed: UInt32 = 0, opened: UInt32 = 1, waited: UInt32 = 2

    package init() {
        word = .allocate(capacity: 1)
        word.initialize(to: Atomic(Self.closed))
    }

    deinit {
        word.deinitialize(count: 1)
        word.deallocate()
    }

    /// Opens the gate and wakes every waiter. Once.
    package func open() {
        if word.pointee.exchange(Self.opened, ordering: .acquiringAndReleasing) == Self.waited {
            Kernel.wakeWord(futexWord, all: true)
        }
    }

    /// Returns once the gate is open (at once if it is).
    package func wait() {
        var value = word.pointee.load(ordering: .acquiring)
        while value != Self.opened {
            if value == Self.closed {
                let (exchanged, original) = word.pointee.compareExchange(
                    expected: Self.closed, desired: Self.waited, ordering: .acquiringAndReleasing)
                if !exchanged { value = original; continue }
            }
            // Sleeps while the word says waited; a wake-up, a spurious return, EAGAIN (it
            // changed) or EINTR only makes it look again.
            _ = try? Kernel.waitOnWord(futexWord, while: Self.waited, before: .distantFuture)
            value = word.pointee.load(ordering: .acquiring)
        }
    }

    /// The word's address, as the kernel's futex calls take it.
    private var futexWord: UnsafeMutablePointer<UInt32> {
        UnsafeMutableRawPointer(word).assumingMemoryBound(to: UInt32.self)
    }
}
