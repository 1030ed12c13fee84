import Glibc

/// Runs a command's work on a thread of its own, and waits for that thread to exit.
///
/// When a thread exits, RunLoopKit tears down what it set up there: the private reply
/// port of its requests gives its name back (its socket and lock files leave the runtime
/// directory) and its sockets close. The main thread never exits (the process does), so
/// work done there would leave a stale reply-port name behind in every run.
enum ToolThread {
    private final class Job: @unchecked Sendable {
        let body: @Sendable () throws(ToolFailure) -> Void
        var failure: ToolFailure? // written by the thread, read after it was joined
        init(_ body: @escaping @Sendable () throws(ToolFailure) -> Void) { self.body = body }
    }

    static func run(_ body: @escaping @Sendable () throws(ToolFailure) -> Void) throws(ToolFailure) {
        let job = Job(body)
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { pointer in
            let job = Unmanaged<Job>.fromOpaque(pointer!).takeUnretainedValue()
            do throws(ToolFailure) { try job.body() } catch { job.failure = error }
            return nil
        }, Unmanaged.passUnretained(job).toOpaque())
        guard rc == 0 else { throw ToolFailure(.failure, "cannot start a thread: error \(rc)") }
        pthread_join(thread, nil) // after the thread's RunLoopKit state was torn down
        if let failure = job.failure { throw failure }
    }
}
