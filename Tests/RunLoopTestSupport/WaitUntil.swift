import Glibc
import RunLoopSystem

/// Polls `condition` until it holds or `limit` passes, and says whether it held: for state
/// another thread or process changes where no event can be waited on (a port's counters, a
/// right's cancellation, a peer's death seen by the loop). The first hundred polls only
/// yield the processor, so a condition about to hold costs no millisecond; the rest are a
/// millisecond apart, so a long wait leaves the processor to the thread it waits for. A
/// deadline, not a sleep, decides: the test fails with `false` if the condition never holds.
package func waitUntil(within limit: Duration = .seconds(10), _ condition: () -> Bool) -> Bool {
    let deadline = Deadline.after(limit)
    var polls = 0
    while !condition() {
        guard Deadline.now() < deadline else { return false }
        polls += 1
        if polls < 100 { sched_yield() } else { usleep(1_000) }
    }
    return true
}
