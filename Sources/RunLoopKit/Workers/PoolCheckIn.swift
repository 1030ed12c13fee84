import RunLoopCore
import RunLoopSystem

/// The guide's check-in (Listings 3-12 to 3-15) as a pool starts: the creating thread
/// owns a port; each worker, on its own thread, creates a port of its own, adds it to its
/// loop and sends message 100 with that port as the reply port; the creator collects them.
///
/// The creator's loop may not be running (a pool is often made from straight-line code),
/// so `collect` runs it in a private mode holding only the check-in port, as
/// request/reply does, until every worker checked in or the timeout passes.
///
/// Thread safety: the creator's thread only, but for `checkIn`, which runs on a worker's.
final class PoolCheckIn {
    /// The check-in message's id (`kCheckinMessage` in Listing 3-13).
    static let messageID: Int32 = 100
    /// The private mode the creator's loop runs in while it waits.
    static let mode = LoopMode("com.runloopkit.pool.checkin")

    private let port: LocalPort
    private let expected: Int
    private var received: [Int: RemotePort] = [:] // creator thread only

    /// Creates the check-in port on the calling thread and adds it to the private mode.
    init(expected: Int) throws(PortError) {
        self.expected = expected
        port = try LocalPort()
        port.handler = .returning { [weak self] message in
            self?.receive(message)
            return nil
        }
        ThreadRunLoop.current.add(port, to: PoolCheckIn.mode)
    }

    /// Where workers send their check-in.
    var remote: RemotePort { port.remote }

    /// Worker `index`'s check-in, on the worker's thread: `workerPort` goes as the reply port.
    static func checkIn(index: Int, with workerPort: LocalPort, to pool: RemotePort,
                        timeout: Duration) throws(PortError) {
        try pool.send(LoopMessage(id: messageID, text: String(index), replyPort: workerPort.remote), timeout: timeout)
    }

    /// Runs the creator's loop in the private mode until all workers checked in or
    /// `deadline`; returns the ports in worker order, or how many checked in.
    func collect(until deadline: Deadline) -> Result<[RemotePort], PortError> {
        let loop = ThreadRunLoop.current
        while received.count < expected && Deadline.now() < deadline {
            _ = loop.run(mode: PoolCheckIn.mode, until: deadline, returnAfterSourceHandled: true)
        }
        guard received.count == expected else {
            return .failure(.checkInTimedOut(expected: expected, checkedIn: received.count))
        }
        return .success((0..<expected).map { received[$0]! })
    }

    /// Closes the check-in port: it is needed only at start-up.
    func close() { port.invalidate() }

    private func receive(_ message: LoopMessage) {
        guard message.id == PoolCheckIn.messageID, let index = message.text.flatMap({ Int($0) }),
              (0..<expected).contains(index), let workerPort = message.replyPort else { return }
        received[index] = workerPort
    }
}
