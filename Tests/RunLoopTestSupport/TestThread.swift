import Dispatch
import Foundation
import Glibc
import RunLoopCore
import RunLoopSystem
import XCTest

/// A joinable thread, so that tests can wait for a thread to have fully exited
/// (thread-local destructors included).
package final class TestThread: @unchecked Sendable {
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    package private(set) var handle = pthread_t()
    private var joined = false // test thread only

    package init(_ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Body(body)).toOpaque()
        let rc = pthread_create(&handle, nil, { pointer in
            Unmanaged<Body>.fromOpaque(pointer!).takeRetainedValue().run()
            return nil
        }, box)
        precondition(rc == 0, "pthread_create failed: \(rc)")
    }

    package func join() {
        guard !joined else { return }
        joined = true
        pthread_join(handle, nil)
    }

    deinit { join() }
}

/// A thread running its run loop in the default mode (kept alive by an input source of
/// its own) until `stop()`; `loop` is available once `init` returns.
package final class LoopThread: @unchecked Sendable {
    package let loop: ThreadRunLoop
    private let thread: TestThread
    private let keepAlive: LockedValue<InputSource?>

    package init(setUp: @escaping @Sendable (ThreadRunLoop) -> Void = { _ in }) {
        let ready = DispatchSemaphore(value: 0)
        let published = LockedValue<ThreadRunLoop?>(nil)
        let keepAlive = LockedValue<InputSource?>(nil)
        thread = TestThread {
            let loop = ThreadRunLoop.current
            let source = InputSource {}
            loop.add(source, to: .default)
            keepAlive.withLock { $0 = source }
            setUp(loop)
            published.withLock { $0 = loop }
            ready.signal()
            while keepAlive.withLock({ $0?.isValid ?? false }) {
                _ = loop.run(mode: .default, until: .distantFuture, returnAfterSourceHandled: false)
            }
        }
        ready.wait()
        loop = published.withLock { $0! }
        self.keepAlive = keepAlive
    }

    /// Ends the thread's run and waits until the thread has exited.
    package func stop() {
        keepAlive.withLock { $0?.invalidate() }
        loop.stop()
        thread.join()
    }

    /// A test that failed before `stop()` still ends the thread, rather than hang in its join.
    deinit { stop() }
}

/// Waits for a semaphore with a generous safety-net timeout, failing the test if it passes.
package func waitOrFail(_ semaphore: DispatchSemaphore, seconds: Double = 10, _ what: String = "the event",
                file: StaticString = #filePath, line: UInt = #line) {
    if semaphore.wait(timeout: .now() + seconds) == .timedOut {
        XCTFail("timed out waiting for \(what)", file: file, line: line)
    }
}

/// A thread-safe recorder of what happened, in order.
package final class EventLog: @unchecked Sendable {
    private let events = LockedValue<[String]>([])
    package init() {}
    package func append(_ event: String) { events.withLock { $0.append(event) } }
    package var all: [String] { events.withLock { $0 } }
}

/// A value shared between threads, for tests that import only RunLoopKit's public API.
package final class SharedValue<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value // protected by lock
    package init(_ value: Value) { self.value = value }
    package func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

/// Runs the calling thread's loop in `mode`, returning after each handled source, until
/// `condition` holds; false if the safety net passes first.
package func runCurrentLoop(in mode: LoopMode = .default, safetyNet: Duration = .seconds(20),
                    until condition: () -> Bool) -> Bool {
    let limit = Deadline.after(safetyNet)
    while !condition() {
        guard Deadline.now() < limit else { return false }
        _ = ThreadRunLoop.current.run(mode: mode, until: limit, returnAfterSourceHandled: true)
    }
    return true
}

/// Keeps a worker busy: `handOver` queues work on it (`worker.async`, `pool.async`) that
/// blocks until the returned gate is signalled; returns once that work runs.
package func occupyWorker(file: StaticString = #filePath, line: UInt = #line,
                  _ handOver: (@escaping @Sendable () -> Void) throws -> Void) rethrows -> DispatchSemaphore {
    let gate = DispatchSemaphore(value: 0)
    let busy = DispatchSemaphore(value: 0)
    try handOver { busy.signal(); gate.wait() }
    waitOrFail(busy, "the worker to be busy", file: file, line: line)
    return gate
}
