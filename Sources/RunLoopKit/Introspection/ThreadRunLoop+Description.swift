import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
/// The loop's description: every mode and item on its own thread, a summary elsewhere.
extension ThreadRunLoop {
    /// On the loop's thread, `snapshot().description`: its modes (running and common),
    /// and per mode every source, port, timer and observer, with the loop's counters.
    /// From any other thread, which may not read the loop's items, a one-line summary.
    public var description: String {
        if isOwnerThread { return snapshot().description }
        return "ThreadRunLoop(\(isMain ? "main" : "thread"), waiting: \(isWaiting); "
            + "describe it on its own thread, or take snapshot() there)"
    }
}
