import RunLoopSystem
import Dispatch
import Synchronization

/// A pool of resident worker threads that check in over ports as they start, take work
/// round-robin or by least load, and shut down together.
///
/// `init` starts `count` `WorkerThread`s. Each, on its own thread, creates a `LocalPort`,
/// adds it to its loop and checks in with it (message 100, the port as reply port: the
/// guide's protocol); `init` runs the creating thread's loop in a private mode until all
/// checked in, so it works from straight-line code. The ports stay open: messages sent to
/// `ports[i]` are handled on worker `i` by `messageHandler`.
///
///     let pool = try WorkerPool(name: "jobs", count: 4, policy: .leastBusy)
///     try pool.perform { print("on one of the workers") }
///     let sum = try pool.performAndWait { (1...100).reduce(0, +) }
///     pool.stop()
///
/// Thread safety: `init` on any thread (its loop runs in a private mode meanwhile), every
/// other member from any thread. `stop()` from one of the pool's own workers asks all to
/// stop and returns at once; a later `stop()` from another thread, or the pool's release,
/// joins them. A pool released without `stop()` stops itself (`.run`).
public final class WorkerPool: @unchecked Sendable, CustomStringConvertible {
    /// How work is spread over the workers.
    public enum Policy: Sendable, Hashable {
        /// Each worker in turn.
        case roundRobin
        /// The worker with the fewest requests queued or running (ties in turn).
        case leastBusy
    }

    public enum State: Sendable, Hashable {
        case running
        /// Stop requested: no new work is taken; workers are finishing or not yet joined.
        case stopping
        /// Every worker has exited and been joined.
        case stopped
    }

    /// Handles a message sent to a worker's port, on that worker's thread; for a request,
    /// the returned message is the reply.
    public typealias MessageHandler = @Sendable (LoopMessage) -> LoopMessage?

    private enum Lifecycle {
        case running
        /// Who joins the workers (see `StopTransition`).
        case stopping(StopTransition.Joining)
        case stopped
    }

    public let name: String
    public let policy: Policy
    /// The workers, named `<name>-<index>`. Stop them through the pool only.
    public let workers: [WorkerThread]
    /// The ports the workers checked in with, in worker order.
    public let ports: [RemotePort]
    let members: [PoolMember]
    /// The next turn, for round-robin and for breaking ties.
    let turn = Atomic<UInt>(0)

    private let lock = Lock()
    private var lifecycle = Lifecycle.running // protected by lock
    private let joined = JoinGate()

    /// Starts `count` workers (at least one) and waits until all checked in, at most
    /// `checkInTimeout`; if not, stops those that started and throws `checkInTimedOut`.
    public init(name: String = "pool", count: Int, policy: Policy = .roundRobin,
                checkInTimeout: Duration = .seconds(10), messageHandler: MessageHandler? = nil) throws(PortError) {
        precondition(count > 0, "a pool needs at least one worker")
        self.name = name
        self.policy = policy
        let checkIn = try PoolCheckIn(expected: count)
        defer { checkIn.close() }
        let deadline = Deadline.after(checkInTimeout)
        var started: [StartingWorker] = []
        do {
            // Every worker is started first, then waited for, so that their start-ups overlap.
            for index in 0..<count {
                started.append(try StartingWorker(index: index, name: "\(name)-\(index)", checkIn: checkIn.remote,
                                                  timeout: checkInTimeout, messageHandler: messageHandler))
            }
        } catch {
            for starting in started { starting.worker.stop(pending: .cancel) }
            throw .system(error)
        }
        var workerPorts: [LocalPort] = []
        var setUpError: PortError?
        for starting in started {
            switch starting.waitUntilSetUp() {
            case .success(let port): workerPorts.append(port)
            case .failure(let error): setUpError = setUpError ?? error
            }
        }
        if let setUpError {
            for starting in started { starting.worker.stop(pending: .cancel) }
            throw setUpError
        }
        switch checkIn.collect(until: deadline) {
        case .success(let ports):
            self.ports = ports
            members = started.indices.map { index in
                PoolMember(index: index, worker: started[index].worker, port: workerPorts[index],
                           checkedInPort: ports[index])
            }
            workers = started.map(\.worker)
        case .failure(let error):
            for starting in started { starting.worker.stop(pending: .cancel) }
            throw error
        }
    }

    deinit {
        stop(pending: .run)
    }

    /// The number of workers.
    public var count: Int { members.count }

    /// Where the pool is in its life. Any thread.
    public var state: State {
        lock.withLock {
            switch lifecycle {
            case .running: .running
            case .stopping: .stopping
            case .stopped: .stopped
            }
        }
    }

    var isRunning: Bool { state == .running }

    /// Stops every worker (see `WorkerThread.stop(pending:)`): all are asked at once, then
    /// joined. Any thread, any number of times; concurrent calls join once and all return
    /// stopped. On one of the pool's own workers it only asks, and returns at once.
    public func stop(pending: WorkerThread.PendingWork = .run) {
        let onWorker = workers.contains { $0.isCurrent }
        let role = lock.withLock { () -> StopTransition.Role in
            let joining: StopTransition.Joining?
            switch lifecycle {
            case .running: joining = nil
            case .stopping(let current): joining = current
            case .stopped: return .none
            }
            let (next, role) = StopTransition.stop(from: joining, by: .caller, onOwnThread: onWorker)
            lifecycle = .stopping(next)
            return role
        }
        // Every worker is asked first, so that they finish their pending work in parallel.
        for worker in workers { worker.control.stop(pending: pending, by: .requestOnly) }
        switch role {
        case .none, .detach:
            break
        case .join:
            for worker in workers { worker.stop(pending: pending) }
            lock.withLock { lifecycle = .stopped }
            joined.open()
        case .waitForJoiner:
            joined.wait()
        }
    }

    public var description: String { "WorkerPool(\(name), \(count) workers, \(policy), \(state))" }
}
