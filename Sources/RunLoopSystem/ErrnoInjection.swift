#if ERRNO_INJECTION
import Glibc

/// Makes the funnels (`systemCall`, and `zmqCall` in the ZeroMQ layer) fail chosen
/// attempts of named calls with a chosen `errno`, on the calling thread, for tests of their
/// retry and failure paths (swift-system's `ForceErrno`). A forced attempt does not make
/// the call: the funnel sees -1 and the `errno`, as after a call the kernel refused.
///
/// Debug builds only (`ERRNO_INJECTION`, set in Package.swift): in release the funnels are
/// compiled without it. In debug, a funnel asks a thread-local for an injection before each
/// attempt and finds none outside `during`.
///
///     let injection = ErrnoInjection(.init("read", errno: EINTR, onAttempts: 1...2))
///     let count = try injection.during { try Kernel.read(fd, into: buffer) }
///     // injection.calls == ["read", "read", "read"]
package final class ErrnoInjection {
    /// `errno` for the attempts numbered `attempts` (from 1, counting every attempt of a
    /// call that `call` names, retries included) of the calls `call` names: a call's
    /// name as the funnel has it (`"open(/tmp/x)"`), or that name up to its `(` (`"open"`).
    package struct Fault {
        package let call: String
        package let errno: Int32
        package let attempts: ClosedRange<Int>

        package init(_ call: String, errno: Int32, onAttempts attempts: ClosedRange<Int> = 1...1) {
            self.call = call
            self.errno = errno
            self.attempts = attempts
        }

        func names(_ name: String) -> Bool {
            name == call || (name.hasPrefix(call) && name.dropFirst(call.count).first == "(")
        }
    }

    private let faults: [Fault]
    private var attemptsSeen: [Int]
    /// The name of every attempt the funnels made on this thread during `during`, forced or not.
    package private(set) var calls: [String] = []

    package init(_ faults: Fault...) {
        self.faults = faults
        attemptsSeen = Array(repeating: 0, count: faults.count)
    }

    /// Runs `body` with the faults in force on this thread (not nested).
    package func during<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        precondition(pthread_getspecific(errnoInjectionKey) == nil, "an injection is already in force on this thread")
        pthread_setspecific(errnoInjectionKey, Unmanaged.passUnretained(self).toOpaque())
        defer { pthread_setspecific(errnoInjectionKey, nil) }
        return try withExtendedLifetime(self) { () throws(E) -> R in try body() }
    }

    /// One attempt of `name`: the `errno` to force, or nil to make the call.
    fileprivate func attempt(_ name: String) -> Int32? {
        calls.append(name)
        var forced: Int32?
        for index in faults.indices where faults[index].names(name) {
            attemptsSeen[index] += 1
            if forced == nil && faults[index].attempts.contains(attemptsSeen[index]) { forced = faults[index].errno }
        }
        return forced
    }
}

/// The thread-local that holds the injection in force (unretained; `during` keeps it alive).
private let errnoInjectionKey: pthread_key_t = {
    var key = pthread_key_t()
    precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
    return key
}()

/// The funnels' question before each attempt: the `errno` to fail it with, or nil (always,
/// outside `ErrnoInjection.during`). Out of line, so that the funnels stay small.
@usableFromInline @inline(never)
package func injectedErrno(_ name: () -> String) -> Int32? {
    guard let injection = pthread_getspecific(errnoInjectionKey) else { return nil }
    return Unmanaged<ErrnoInjection>.fromOpaque(injection).takeUnretainedValue().attempt(name())
}
#endif
