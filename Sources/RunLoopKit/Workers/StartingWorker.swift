import RunLoopCore
import RunLoopSystem

/// A pool's worker between its start and its check-in: started without waiting for its
/// set-up (which, on the worker's thread, creates its port, adds it to the worker's loop
/// and checks in with it), so that a pool starts all its workers before it waits for any.
///
/// Thread safety: the pool's creating thread, but for the set-up, which runs on the
/// worker's thread and hands its outcome over through `outcome`.
final class StartingWorker {
    let worker: WorkerThread
    /// The set-up's outcome: written on the worker's thread before its set-up returns,
    /// read after `waitUntilSetUp()`.
    private let outcome: LockedValue<Result<LocalPort, PortError>?>

    /// Starts worker `index` named `name`, whose set-up checks in with `checkIn`; returns
    /// without waiting for it. Throws if the thread cannot be created.
    init(index: Int, name: String, checkIn: RemotePort, timeout: Duration,
         messageHandler: WorkerPool.MessageHandler?) throws(SystemCallError) {
        let outcome = LockedValue<Result<LocalPort, PortError>?>(nil)
        self.outcome = outcome
        worker = try WorkerThread(startingNamed: name, setUp: {
            do throws(PortError) {
                let port = try LocalPort(handler: messageHandler)
                ThreadRunLoop.current.add(port, to: .default)
                try PoolCheckIn.checkIn(index: index, with: port, to: checkIn, timeout: timeout)
                outcome.withLock { $0 = .success(port) }
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
        })
    }

    /// Blocks until the worker's set-up has run; returns the port it checked in with, or
    /// why it could not. Once.
    func waitUntilSetUp() -> Result<LocalPort, PortError> {
        worker.waitUntilSetUp()
        guard let result = outcome.withLock({ $0 }) else {
            preconditionFailure("a worker's set-up records its outcome before it returns")
        }
        return result
    }
}
