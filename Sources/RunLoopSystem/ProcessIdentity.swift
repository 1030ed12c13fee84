import Glibc
import Synchronization

/// This process's id without a system call: read once, and again in the child of every
/// `fork` (a `pthread_atfork` child handler, installed at the first read). For checks on a
/// path too hot for `getpid(2)`, a real system call in glibc since 2.25, such as whether a
/// shared ring a sending thread holds is its own process's or a forked parent's.
package enum ProcessIdentity {
    /// The id of the process running now.
    package static var current: pid_t {
        _ = installed
        return cached.load(ordering: .relaxed)
    }

    private static let cached = Atomic<pid_t>(getpid())

    /// The child handler, installed once; what it stores is read by the child's one thread.
    private static let installed: Void = {
        pthread_atfork(nil, nil) { ProcessIdentity.cached.store(getpid(), ordering: .relaxed) }
        cached.store(getpid(), ordering: .relaxed) // a fork before the handler was there
    }()
}
