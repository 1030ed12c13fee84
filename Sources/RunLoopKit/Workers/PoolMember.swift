import Synchronization

/// One worker of a pool: its thread, the port it checked in with, and how much work it has.
///
/// Thread safety: immutable but for `outstanding`, which is atomic.
final class PoolMember: Sendable {
    let index: Int
    let worker: WorkerThread
    /// The worker's own port (owned by its thread), held so that it lives as long as the pool.
    let port: LocalPort
    /// The port the worker checked in with, as received by the pool.
    let checkedInPort: RemotePort
    /// Requests handed to this worker and not yet run or cancelled (for `leastBusy`).
    let outstanding = Atomic<Int>(0)

    init(index: Int, worker: WorkerThread, port: LocalPort, checkedInPort: RemotePort) {
        self.index = index
        self.worker = worker
        self.port = port
        self.checkedInPort = checkedInPort
    }

    /// Counts one more request until the returned token ends it.
    func begin() -> BusyToken { BusyToken(self) }
}

/// One request's share of its worker's `outstanding` count. It ends when the work has run
/// (before its waiter is woken, so that the next choice sees it) or, if the request is
/// cancelled instead, when the request drops its closure, and with it this token.
final class BusyToken: Sendable {
    let member: PoolMember
    private let ended = Atomic<Bool>(false)

    init(_ member: PoolMember) {
        self.member = member
        member.outstanding.add(1, ordering: .relaxed)
    }

    func end() {
        guard !ended.exchange(true, ordering: .relaxed) else { return }
        member.outstanding.subtract(1, ordering: .relaxed)
    }

    deinit { end() }
}
