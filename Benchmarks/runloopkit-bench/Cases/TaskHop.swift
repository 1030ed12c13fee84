import Dispatch
import Foundation
import LatencyStatistics
import RunLoopKit

// Both actors change isolated state on every call: Swift's optimizer may drop the hop to an
// actor's executor for a method that touches none, which would time nothing.

/// An actor pinned to a RunLoopKit worker's run-loop thread (its executor is the loop's).
actor PinnedEcho {
    let worker: WorkerThread
    private var calls = 0
    nonisolated var unownedExecutor: UnownedSerialExecutor { worker.executor.asUnownedSerialExecutor() }
    init(worker: WorkerThread) { self.worker = worker }
    func echo(_ value: Int) -> Int {
        precondition(worker.loop.isOwnerThread, "the pinned actor ran off its worker's thread")
        calls += 1
        return value
    }
}

/// A serial `DispatchQueue` as an actor's executor: what `DispatchSerialQueue` is on Apple's
/// platforms, where `unownedExecutor` returns `queue.asUnownedSerialExecutor()`. The
/// toolchain's Dispatch on Linux has neither `DispatchSerialQueue` nor that conformance, so
/// this does what it does: each job is run on the queue, with the queue as its executor.
final class DispatchSerialExecutor: SerialExecutor {
    let queue: DispatchQueue

    init(label: String) { queue = DispatchQueue(label: label) }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}

/// An actor whose executor is a serial dispatch queue: the real alternative to pinning an
/// actor to a loop thread (a thread of its own, woken for each call).
actor QueueEcho {
    let executor: DispatchSerialExecutor
    private var calls = 0
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    init(executor: DispatchSerialExecutor) { self.executor = executor }
    func echo(_ value: Int) -> Int {
        dispatchPrecondition(condition: .onQueue(executor.queue))
        calls += 1
        return value
    }
}

/// A plain actor, on Swift's default (cooperative pool) executor.
actor PlainEcho {
    private var calls = 0
    func echo(_ value: Int) -> Int {
        calls += 1
        return value
    }
}

/// Times `count` awaits of `call` from a task on the cooperative pool: for the pinned
/// actor, a hop onto the worker's thread and back.
private func timeAwaits(_ count: Int, _ call: @escaping @Sendable (Int) async -> Int) -> LatencyHistogram {
    /// Written by the task before it signals `done`, read after `done.wait()`: the
    /// semaphore orders the two.
    final class Outcome: @unchecked Sendable { var recorder = LatencyHistogram() }
    let done = DispatchSemaphore(value: 0)
    let outcome = Outcome()
    Task {
        var recorder = LatencyHistogram()
        for index in 0..<count {
            let start = Clock.now()
            let answer = await call(index)
            recorder.record(nanoseconds: Clock.now() &- start)
            precondition(answer == index)
        }
        outcome.recorder = recorder
        done.signal()
    }
    done.wait()
    return outcome.recorder
}

final class RunLoopKitTaskHop: LatencyContender {
    let name = "runloopkit"
    private let worker: WorkerThread
    private let echo: PinnedEcho

    init() {
        do {
            worker = try WorkerThread(name: "bench-actor")
        } catch {
            fatalError("cannot start the worker: \(error)")
        }
        echo = PinnedEcho(worker: worker)
    }

    func measure(_ count: Int) -> LatencyHistogram {
        let echo = echo
        return timeAwaits(count) { await echo.echo($0) }
    }

    func finish() { worker.stop() }
}

final class DispatchSerialExecutorHop: LatencyContender {
    let name = "dispatch-serial-executor"
    private let echo = QueueEcho(executor: DispatchSerialExecutor(label: "runloopkit-bench.task-hop"))

    func measure(_ count: Int) -> LatencyHistogram {
        let echo = echo
        return timeAwaits(count) { await echo.echo($0) }
    }

    func finish() {}
}

final class DefaultActorHop: LatencyContender {
    let name = "default-actor"
    private let echo = PlainEcho()

    func measure(_ count: Int) -> LatencyHistogram {
        let echo = echo
        return timeAwaits(count) { await echo.echo($0) }
    }

    func finish() {}
}

/// Issue 5's task-to-thread hop: a task awaiting a method of an actor pinned to a worker's
/// run loop, beside the same call on an actor whose executor is a serial dispatch queue
/// (the target: issue 15) and on a plain actor (for scale: it may run on the awaiting
/// task's own pool thread without any thread switch).
enum TaskHopCase {
    static let name = "task-hop"

    static func run(_ config: BenchConfig) -> CaseOutcome {
        // The hop's two threads are a latency pair, but one of them is the cooperative pool's:
        // so the whole process shares CPU 0 (see `Placement`) while the case runs.
        let distributions = Placement.withProcessPinned(to: Placement.pair) { () -> [Distribution] in
            let contenders: [any LatencyContender] = [RunLoopKitTaskHop(), DispatchSerialExecutorHop(), DefaultActorHop()]
            return Harness.latencies(contenders, config)
        }
        var outcome = CaseOutcome(name: name, distributions: distributions, chartCaption: "await an actor method from a task")
        outcome.metrics = [
            distributions.metric(name, "us_p50", targets: [.atMostTimes(1, peer: "dispatch-serial-executor")]) { $0.p50 },
        ]
        return outcome
    }
}
