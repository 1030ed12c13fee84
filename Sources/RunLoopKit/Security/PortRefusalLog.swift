import RunLoopCore
import RunLoopSystem
import Glibc
import Logging

/// The log lines for clients an allow-list refused, written by a thread of their own, off
/// the handshake path (`docs/security.md`, "A refused client").
///
/// The process's ZAP handler is one thread that answers every CURVE handshake of the
/// process, and libzmq holds each handshake until it is answered: a refusal logged there
/// would stall every handshake behind a slow log backend, and anyone holding a port's
/// public key could flood the log. So the handler only counts a refusal
/// (`PortStatistics.clientsRefused`, exact) and notes it here, under a lock held for a
/// dictionary update; this thread (`runloopkit.log`) writes the lines, at most one per
/// port a second: the first refusal at once, then one line for all those of the next second
/// (their number, and the first one's key and address). It sleeps between lines and waits
/// on a semaphore when there is nothing to write; a slow log backend stalls it alone, while
/// refusals keep being counted (one entry per port, whatever their number).
final class PortRefusalLog: Sendable {
    /// The refusals of one port not logged yet: how many, and the first one's details.
    struct Pending: Sendable {
        var count: Int
        let client: String
        let address: String
        let mechanism: String
    }

    /// At most one line per port this often.
    static let interval: Duration = .seconds(1)

    private static let started = LockedValue<PortRefusalLog?>(nil)

    /// Refusals not logged yet, by port, in the order their ports first had one.
    private let pending = LockedValue<(byPort: [String: Pending], order: [String])>(([:], []))
    /// Posted when `pending` goes from empty to not empty. A semaphore is made for threads
    /// to share: `sem_post` and `sem_wait` from any thread.
    nonisolated(unsafe) private let work: UnsafeMutablePointer<sem_t>

    private init() {
        work = UnsafeMutablePointer<sem_t>.allocate(capacity: 1) // for the life of the process
        sem_init(work, 0, 0)
    }

    /// The process's refusal log, its thread started by the first call (by the first port
    /// with an allow-list); a later call tries again if the thread could not start.
    static func shared() throws(SystemCallError) -> PortRefusalLog {
        try started.withLock { current throws(SystemCallError) -> PortRefusalLog in
            if let current { return current }
            let log = PortRefusalLog()
            try NativeThread.start(name: "runloopkit.log") { log.write() }.detach()
            current = log
            return log
        }
    }

    /// Notes a refusal, on the ZAP handler's thread: never logs, never waits for the writer.
    func record(port: String, client: String, address: String, mechanism: String) {
        let wasEmpty = pending.withLock { state -> Bool in
            let wasEmpty = state.byPort.isEmpty
            if state.byPort[port] != nil {
                state.byPort[port]!.count += 1
            } else {
                state.byPort[port] = Pending(count: 1, client: client, address: address, mechanism: mechanism)
                state.order.append(port)
            }
            return wasEmpty
        }
        if wasEmpty { sem_post(work) }
    }

    /// The writer's loop, for the rest of the process.
    private func write() {
        while true {
            while sem_wait(work) != 0 && errno == EINTR {}
            let (byPort, order) = pending.withLock { state in
                defer { state = ([:], []) }
                return (state.byPort, state.order)
            }
            let written = Deadline.now()
            for port in order {
                guard let refused = byPort[port] else { continue }
                Self.log(refused, port: port)
            }
            Kernel.sleep(until: written + Self.interval) // what comes meanwhile makes one line a port
        }
    }

    private static func log(_ refused: Pending, port: String) {
        var metadata: Logger.Metadata = [
            "port": "\(port)", "client": "\(refused.client)", "address": "\(refused.address)",
            "mechanism": "\(refused.mechanism)",
        ]
        if refused.count == 1 {
            RunLoopKitLog.port.info("client refused: its key is not on the port's allow-list", metadata: metadata)
        } else {
            metadata["refused"] = "\(refused.count)"
            RunLoopKitLog.port.info(
                "\(refused.count) clients refused: their keys are not on the port's allow-list (the first one's shown)",
                metadata: metadata)
        }
    }
}
