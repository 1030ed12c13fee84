import RunLoopCore
import RunLoopSystem

/// Introspection: a loop's items and counters as a value.
extension ThreadRunLoop {
    /// The loop's modes, items and counters now. Loop thread only (it reads what only
    /// that thread may touch, and checks); from another thread use
    /// `try loop.performAndWait { loop.snapshot() }`, which waits for the loop's next pass
    /// in a common mode.
    ///
    /// It changes nothing the loop does: it reads what the loop already knows and asks no
    /// socket anything (asking ZeroMQ whether a message waits would consume the port's
    /// wake-up), so a port's ``LoopSnapshot/PortInfo/isQueuedAsReady`` is the loop's own
    /// view, which learns of a newly arrived message only when the loop next polls.
    public func snapshot() -> LoopSnapshot {
        assertOwnerThread()
        let now = Deadline.now()
        let (commonItems, sortedModes) = itemsByMode
        return LoopSnapshot(
            isMainLoop: isMain,
            takenAt: now,
            runningModes: runningModes,
            commonModes: commonModes.sorted { $0.rawValue < $1.rawValue },
            commonModeItems: contents(of: commonItems, isCommon: false, at: now),
            modes: sortedModes.map { contents(of: $0, isCommon: commonModes.contains($0.mode), at: now) },
            pendingPerformRequests: pendingPerformRequestCount,
            counters: counters
        )
    }

    private func contents(of items: ModeItems, isCommon: Bool, at now: Deadline) -> LoopSnapshot.ModeContents {
        LoopSnapshot.ModeContents(
            mode: items.mode,
            isCommon: isCommon,
            sources: items.sources.map { source in
                LoopSnapshot.SourceInfo(id: ObjectIdentifier(source), order: source.order,
                                        isSignalled: source.isSignalled, isValid: source.isValid)
            },
            // The user's ports; a requester's connection (`PortConnection`) is the library's own.
            ports: items.ports.compactMap { $0 as? LocalPort }.map { port in
                LoopSnapshot.PortInfo(id: ObjectIdentifier(port), address: port.remote.address, name: port.name,
                                      isQueuedAsReady: isQueuedAsReady(port),
                                      messagesReceived: port.statistics.messagesReceived,
                                      messagesDropped: port.statistics.messagesDropped,
                                      repliesFailed: port.statistics.repliesFailed,
                                      rightsOutstanding: port.statistics.rightsOutstanding,
                                      requestsCancelled: port.statistics.requestsCancelled)
            },
            timers: items.timers.map { timer in
                LoopSnapshot.TimerInfo(id: ObjectIdentifier(timer), fireDate: timer.fireDate,
                                       fireDelay: timer.fireDate - now, interval: timer.interval,
                                       tolerance: timer.tolerance, isValid: timer.isValid)
            },
            observers: items.observers.map { observer in
                LoopSnapshot.ObserverInfo(id: ObjectIdentifier(observer), activities: observer.activities,
                                          order: observer.order, repeats: observer.repeats,
                                          isValid: observer.isValid)
            }
        )
    }
}

/// The loop's description: every mode and item on its own thread, a summary elsewhere.
extension ThreadRunLoop: CustomStringConvertible {
    /// On the loop's thread, `snapshot().description`: its modes (running and common),
    /// and per mode every source, port, timer and observer, with the loop's counters.
    /// From any other thread, which may not read the loop's items, a one-line summary.
    public var description: String {
        if isOwnerThread { return snapshot().description }
        return "ThreadRunLoop(\(isMain ? "main" : "thread"), waiting: \(isWaiting); "
            + "describe it on its own thread, or take snapshot() there)"
    }
}
