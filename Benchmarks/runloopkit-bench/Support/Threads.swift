import Dispatch
import Glibc
import Synchronization

/// A joinable pthread running one closure.
struct JoinableThread: @unchecked Sendable {
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    private let handle: pthread_t

    /// Starts a thread running `body`, pinned to `cpu` if one is given; crashes if the
    /// system refuses (a benchmark cannot go on).
    static func start(cpu: Int? = nil, _ body: @escaping @Sendable () -> Void) -> JoinableThread {
        let pinned: @Sendable () -> Void = {
            if let cpu { Placement.pinCurrentThread(to: cpu) }
            body()
        }
        let box = Unmanaged.passRetained(Body(pinned)).toOpaque()
        var handle = pthread_t()
        let rc = pthread_create(&handle, nil, { pointer in
            Unmanaged<Body>.fromOpaque(pointer!).takeRetainedValue().run()
            return nil
        }, box)
        guard rc == 0 else { fatalError("pthread_create failed: \(rc)") }
        return JoinableThread(handle: handle)
    }

    func join() { pthread_join(handle, nil) }
}

/// A thread that runs the closures handed to it, one at a time, while the caller waits:
/// the "driver" side of a case, so that set-up, measurement and tear-down of a peer all
/// happen on the same thread (its run loop, its sockets).
final class CommandThread: @unchecked Sendable {
    private let pending = Mutex<(@Sendable () -> Void)?>(nil)
    private let go = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    private let quit = Atomic<Bool>(false)
    private var thread: JoinableThread?

    /// A thread pinned to `cpu` (see `Placement`), or placed by the scheduler when nil.
    init(cpu: Int? = Placement.pair) {
        thread = JoinableThread.start(cpu: cpu) { [self] in serve() }
    }

    /// Runs `work` on the thread and returns its result once it is done.
    func run<T: Sendable>(_ work: @escaping @Sendable () -> T) -> T {
        let result = Mutex<T?>(nil)
        start { let value = work(); result.withLock { $0 = value } }
        wait()
        return result.withLock { $0! }
    }

    /// Starts `work` on the thread and returns at once; `wait()` for it before the next.
    func start(_ work: @escaping @Sendable () -> Void) {
        pending.withLock { $0 = work }
        go.signal()
    }

    /// Waits until the work given to `start` is done.
    func wait() { done.wait() }

    /// Ends the thread (its thread-local state, a run loop included, is torn down) and joins it.
    func finish() {
        guard !quit.exchange(true, ordering: .acquiringAndReleasing) else { return }
        go.signal()
        thread?.join()
    }

    private func serve() {
        while true {
            go.wait()
            if quit.load(ordering: .acquiring) { return }
            let work = pending.withLock { job -> (@Sendable () -> Void)? in
                defer { job = nil }
                return job
            }
            work?()
            done.signal()
        }
    }
}

/// A box for a value that only one thread uses at a time, handed between threads at points
/// where a semaphore or a join orders the accesses (benchmark state that is not `Sendable`).
final class Confined<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}

/// An atomic integer in a class, so that escaping closures can share it.
final class SharedCounter: Sendable {
    private let atomic = Atomic<Int>(0)

    func load() -> Int { atomic.load(ordering: .acquiring) }
    func store(_ value: Int) { atomic.store(value, ordering: .releasing) }
}
