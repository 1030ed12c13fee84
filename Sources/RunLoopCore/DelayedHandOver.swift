import RunLoopSystem

/// Delayed performs handed to a loop from any thread, and their cancellation.
///
/// A delayed perform is a timer (`ThreadRunLoop.schedulePerform(after:)`), so it belongs to
/// the loop's thread; from another thread a perform request (the hand-over) schedules it
/// there. A cancel must then catch the delayed perform at every stage: the hand-over still queued (cancelled
/// like any request), already done (its delayed request is cancelled), or running at that
/// very moment. For the last, each hand-over carries a ticket of the cancellations made
/// before it was queued, and schedules only if no cancellation for its tag came since;
/// cancelling and scheduling take the same lock, so neither slips between the other's steps.
///
/// Thread safety: every member from any thread; the hand-over closures run on the loop's thread.
package final class DelayedHandOver: @unchecked Sendable {
    struct Ticket {
        let tag: String?
        let allCancellations: UInt64
        let tagCancellations: UInt64
    }

    private let lock = Lock()
    private var allCancellations: UInt64 = 0 // protected by lock: cancels of every tag
    private var tagCancellations: [String: UInt64] = [:] // protected by lock: cancels per tag

    package init() {}

    /// The closure that, run on the loop's thread, schedules `work` at `delay` from now
    /// (from this call, not from when the loop gets to it), unless cancelled meanwhile.
    package func handOver(to loop: ThreadRunLoop, after delay: Duration, inModes modes: [LoopMode], tag: String?,
                  _ work: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        let due = Deadline.after(delay)
        let ticket = lock.withLock {
            Ticket(tag: tag, allCancellations: allCancellations,
                   tagCancellations: tag.flatMap { tagCancellations[$0] } ?? 0)
        }
        return { [self] in
            lock.withLock {
                guard isValid(ticket) else { return }
                _ = loop.schedulePerform(after: max(.zero, due - .now()), inModes: modes, tag: tag, work)
            }
        }
    }

    /// Schedules `work` at once; on the loop's thread.
    @discardableResult
    package func schedule(on loop: ThreadRunLoop, after delay: Duration, inModes modes: [LoopMode], tag: String?,
                          _ work: @escaping @Sendable () -> Void) -> PerformRequest {
        lock.withLock { loop.schedulePerform(after: delay, inModes: modes, tag: tag, work) }
    }

    /// Cancels the requests tagged `tag` (all with nil) being handed over, and with
    /// `cancelQueued` those queued or delayed. Returns what `cancelQueued` returns.
    package func cancel(tagged tag: String?, cancelQueued: () -> Int) -> Int {
        lock.withLock {
            if let tag { tagCancellations[tag, default: 0] += 1 } else { allCancellations += 1 }
            return cancelQueued()
        }
    }

    private func isValid(_ ticket: Ticket) -> Bool {
        guard ticket.allCancellations == allCancellations else { return false }
        guard let tag = ticket.tag else { return true }
        return ticket.tagCancellations == (tagCancellations[tag] ?? 0)
    }
}
