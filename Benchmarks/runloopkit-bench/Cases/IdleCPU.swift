import Dispatch
import Foundation
import RunLoopKit

/// The CPU time a loop thread uses while it sleeps for 2 s with only a far timer
/// (`RUSAGE_THREAD`). Foundation's run loop is measured beside it, at the same time, for reference.
enum IdleCPUCase {
    static let name = "idle-cpu"

    static func run(_ config: BenchConfig) -> CaseOutcome {
        let seconds = config.idleSeconds
        let runLoopKit = CommandThread(cpu: nil)
        let foundation = CommandThread(cpu: nil)
        let results = Confined<[Double]>([0, 0])
        runLoopKit.start {
            let loop = ThreadRunLoop.current
            let timer = LoopTimer(after: .seconds(3600)) { _ in }
            loop.add(timer, to: .default)
            let before = System.threadCPUTime()
            let start = Clock.now()
            loop.run(until: .after(.nanoseconds(Int64(seconds * 1e9))))
            precondition(Clock.seconds(since: start) >= seconds * 0.99, "the RunLoopKit loop did not sleep")
            results.value[0] = Double(System.threadCPUTime() - before) / 1e6
            timer.invalidate()
        }
        let foundationResult = foundation.run {
            let timer = Timer(fire: Date(timeIntervalSinceNow: 3600), interval: 0, repeats: false) { _ in }
            RunLoop.current.add(timer, forMode: .default)
            let before = System.threadCPUTime()
            let start = Clock.now()
            RunLoop.current.run(until: Date(timeIntervalSinceNow: seconds))
            precondition(timer.isValid && Clock.seconds(since: start) >= seconds * 0.99, "the Foundation loop did not sleep")
            let used = Double(System.threadCPUTime() - before) / 1e6
            timer.invalidate()
            return used
        }
        runLoopKit.wait()
        runLoopKit.finish()
        foundation.finish()
        var outcome = CaseOutcome(name: name)
        outcome.metrics = [
            MetricResult(caseName: name, metric: "cpu_ms", unit: "ms", lowerIsBetter: true, runloopkit: results.value[0],
                         peers: [PeerValue(name: "foundation-runloop", value: foundationResult)],
                         targets: [.atMost(5)]),
        ]
        outcome.notes = ["\(name): \(Format.value(seconds)) s asleep; foundation-runloop is for reference (no target)"]
        return outcome
    }
}
