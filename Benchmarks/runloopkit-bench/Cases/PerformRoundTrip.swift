import LatencyStatistics
import RunLoopKit

/// `performAndWait` of a closure on another thread's RunLoopKit loop (which sleeps in
/// `run()` on a far timer between requests), returning the closure's answer.
final class RunLoopKitPerform: LatencyContender {
    let name = "runloopkit"
    private let driver = CommandThread()
    private let target = RunLoopKitThread {
        ThreadRunLoop.current.add(LoopTimer(after: .seconds(3600)) { _ in }, to: .default)
    }

    func measure(_ count: Int) -> LatencyHistogram {
        let loop = target.loop
        return driver.run {
            var recorder = LatencyHistogram()
            for index in 0..<count {
                let start = Clock.now()
                let answer: Int
                do {
                    answer = try loop.performAndWait { index &* 2 }
                } catch {
                    fatalError("performAndWait failed: \(error)")
                }
                recorder.record(nanoseconds: Clock.now() &- start)
                precondition(answer == index &* 2)
            }
            return recorder
        }
    }

    func finish() {
        driver.finish()
        target.finish()
    }
}

enum PerformRoundTripCase {
    static let name = "perform-roundtrip"

    static func run(_ config: BenchConfig) -> CaseOutcome {
        let contenders: [any LatencyContender] = [RunLoopKitPerform(), FoundationPerform(), DispatchAsyncRoundTrip()]
        let distributions = Harness.latencies(contenders, config)
        var outcome = CaseOutcome(name: name, distributions: distributions, chartCaption: "perform on another thread and wait")
        outcome.metrics = [
            distributions.metric(name, "us_p50", targets: [.atMostTimes(1, peer: "foundation-perform"),
                                                           .atMostTimes(1.25, peer: "dispatch-async")]) { $0.p50 },
        ]
        return outcome
    }
}
