import Glibc

/// A mutex built on `pthread_mutex_t`.
///
/// RunLoopKit does not use `Synchronization.Mutex` because ThreadSanitizer on Linux
/// reports false races inside it (seen with Swift 6.3.1); a pthread mutex is clean.
@usableFromInline package final class Lock: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let rc = pthread_mutex_init(mutex, nil)
        precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    // Inlinable, like the other locking calls: the layers above call them on every pass.
    @inlinable package func lock() { pthread_mutex_lock(mutex) }
    @inlinable package func unlock() { pthread_mutex_unlock(mutex) }

    /// Runs `body` holding the lock; throws what `body` throws, typed.
    @inlinable @inline(__always)
    package func withLock<T, Failure: Error>(_ body: () throws(Failure) -> T) throws(Failure) -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// A value guarded by a `Lock`: the only way to reach it is inside `withLock`.
@usableFromInline package final class LockedValue<Value>: @unchecked Sendable {
    @usableFromInline let lock = Lock()
    @usableFromInline var value: Value // protected by `lock`

    package init(_ value: Value) { self.value = value }

    @inlinable @inline(__always)
    package func withLock<T, Failure: Error>(_ body: (inout Value) throws(Failure) -> T) throws(Failure) -> T {
        try lock.withLock { () throws(Failure) -> T in try body(&value) }
    }
}
