import CLinuxPoll
import Glibc

/// A joinable pthread running a closure under a name; the handle must be joined or
/// detached exactly once (`WorkerControl` decides which, under its lock).
package struct NativeThread: Sendable {
    /// Linux keeps 15 bytes of a thread's name (`TASK_COMM_LEN` minus the NUL).
    package static let maximumNameBytes = 15

    private final class Body {
        let name: String
        let run: @Sendable () -> Void
        init(name: String, run: @escaping @Sendable () -> Void) {
            self.name = name
            self.run = run
        }
    }

    // Written once by `start`, then only passed to `join` or `detach`.
    private let handle: pthread_t

    /// Starts a thread that names itself `name` (truncated) and runs `body`.
    package static func start(name: String, _ body: @escaping @Sendable () -> Void) throws(SystemCallError) -> NativeThread {
        let box = Unmanaged.passRetained(Body(name: truncated(name), run: body)).toOpaque()
        var handle = pthread_t()
        let rc = pthread_create(&handle, nil, { pointer in
            let body = Unmanaged<Body>.fromOpaque(pointer!).takeRetainedValue()
            _ = clinux_set_thread_name(body.name)
            body.run()
            return nil
        }, box)
        guard rc == 0 else {
            Unmanaged<Body>.fromOpaque(box).release()
            throw SystemCallError(call: "pthread_create", errno: rc) // returns its error, sets no errno
        }
        return NativeThread(handle: handle)
    }

    /// Waits until the thread has exited, thread-local destructors (the loop's teardown) included.
    package func join() {
        let rc = pthread_join(handle, nil)
        precondition(rc == 0, "pthread_join failed: \(rc)")
    }

    /// Lets the thread free its resources itself when it exits (when nobody can join it).
    package func detach() {
        let rc = pthread_detach(handle)
        precondition(rc == 0, "pthread_detach failed: \(rc)")
    }

    /// `name` cut to at most 15 UTF-8 bytes, on a character boundary.
    package static func truncated(_ name: String) -> String {
        name.prefix(utf8Bytes: maximumNameBytes)
    }
}

extension String {
    /// The longest prefix of at most `limit` UTF-8 bytes that ends on a character boundary.
    package func prefix(utf8Bytes limit: Int) -> String {
        guard utf8.count > limit else { return self }
        var kept = ""
        var bytes = 0
        for character in self {
            bytes += character.utf8.count
            guard bytes <= limit else { break }
            kept.append(character)
        }
        return kept
    }
}
