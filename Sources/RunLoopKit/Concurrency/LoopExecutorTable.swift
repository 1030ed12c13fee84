import RunLoopCore
import RunLoopSystem

/// The executors of every loop, one per loop and set of modes, so that all the actors
/// pinned to a loop share one executor (and call each other without a hop), and so that
/// `worker.executor` is safe to call from an actor's `unownedExecutor`.
///
/// An entry lives as long as its loop object (it holds the loop weakly; the executor holds
/// it weakly too), and is pruned once the loop is freed, so a dead loop's address reused by
/// a new loop never finds the old executors.
///
/// Thread safety: every member from any thread.
final class LoopExecutorTable: Sendable {
    private struct Entry {
        weak var loop: ThreadRunLoop?
        var executors: [Set<LoopMode>: LoopExecutor]
    }

    static let shared = LoopExecutorTable()

    private let entries = LockedValue<[ObjectIdentifier: Entry]>([:])

    /// The executor of `loop` for `modes`, and whether this call created it (and must schedule it).
    func executor(for loop: ThreadRunLoop, modes: [LoopMode]) -> (LoopExecutor, created: Bool) {
        let key = Set(modes)
        return entries.withLock { entries in
            let id = ObjectIdentifier(loop)
            if let entry = entries[id], entry.loop === loop, let existing = entry.executors[key] {
                return (existing, false)
            }
            let created = LoopExecutor(loop: loop, modes: modes)
            if entries[id]?.loop !== loop {
                entries = entries.filter { $0.value.loop != nil } // prune loops that are gone
                entries[id] = Entry(loop: loop, executors: [:])
            }
            entries[id]!.executors[key] = created
            return (created, true)
        }
    }
}
