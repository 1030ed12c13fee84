import LatencyStatistics

/// The measuring harness: contenders measured in interleaved rounds after a warm-up.

/// How long a run is: `--quick` or full.
struct BenchConfig: Sendable {
    let quick: Bool
    /// For profiling (`--only`): measure only the contenders with these names (all when empty).
    var only: [String] = []

    /// Rounds of a latency case: every contender measures one batch per round, in turn.
    var latencyRounds: Int { quick ? 5 : 20 }
    /// Round trips per contender and round.
    var latencyBatch: Int { quick ? 1000 : 4000 }
    /// Round trips per contender before measuring.
    var warmUp: Int { quick ? 500 : 2000 }
    /// Rounds of a throughput case, and messages per round.
    var throughputRounds: Int { quick ? 3 : 7 }
    var throughputMessages: Int { quick ? 50_000 : 200_000 }
    /// Timer fires (1 ms apart) per round, and rounds: 8 × 250 fires is the 2 s.
    var timerRounds: Int { quick ? 4 : 8 }
    var timerFires: Int { 250 }
    /// How long the idle loop sleeps.
    var idleSeconds: Double { 2 }
    /// Rounds of the 1,000-thread check-in.
    var checkInRounds: Int { quick ? 2 : 4 }
    /// Worker cycles in all, in chunks interleaved with the peer's.
    var threadCycles: Int { 10_000 }
    var threadCycleChunk: Int { quick ? 2000 : 1000 }
}

/// Something whose latency is measured one batch at a time.
protocol LatencyContender: AnyObject {
    /// The name in the table, the JSON and the chart (`runloopkit` for RunLoopKit).
    var name: String { get }
    /// Performs `count` operations and returns their latencies.
    func measure(_ count: Int) -> LatencyHistogram
    /// Releases threads, sockets and ports.
    func finish()
}

/// Something whose rate (per second, higher is better) is measured one round at a time.
protocol RateContender: AnyObject {
    var name: String { get }
    /// Runs one round and returns its rate.
    func measureRate() -> Double
    func finish()
}

enum Harness {
    /// Warms every contender up, then measures `rounds` rounds of `batch` operations each,
    /// contenders in turn and the order rotated each round (A B C, B C A, …), so that they
    /// share the machine's noise. Finishes them. Returns the distributions in the given order.
    static func latencies(_ all: [any LatencyContender], rounds: Int, batch: Int,
                          warmUp: Int, only: [String] = []) -> [Distribution] {
        defer { all.forEach { $0.finish() } }
        // With `--only`, the others keep their place with an empty distribution.
        let contenders = all.filter { only.isEmpty || only.contains($0.name) }
        for contender in contenders { _ = contender.measure(warmUp) }
        var recorders = Array(repeating: LatencyHistogram(), count: contenders.count)
        for round in 0..<rounds {
            for offset in contenders.indices {
                let index = (round + offset) % contenders.count
                recorders[index].add(contenders[index].measure(batch))
            }
        }
        return all.map { contender in
            let index = contenders.firstIndex { $0 === contender }
            return Distribution(name: contender.name, summary: index.map { LatencySummary(recorders[$0]) } ?? .empty)
        }
    }

    /// `latencies` with a latency case's rounds, batch, warm-up and `--only`, from `config`.
    static func latencies(_ all: [any LatencyContender], _ config: BenchConfig) -> [Distribution] {
        latencies(all, rounds: config.latencyRounds, batch: config.latencyBatch, warmUp: config.warmUp, only: config.only)
    }

    /// One warm-up round, then `rounds` interleaved rounds; the median rate of each contender.
    static func rates(_ all: [any RateContender], rounds: Int, only: [String] = []) -> [PeerValue] {
        defer { all.forEach { $0.finish() } }
        let contenders = all.filter { only.isEmpty || only.contains($0.name) }
        for contender in contenders { _ = contender.measureRate() }
        var samples = Array(repeating: [Double](), count: contenders.count)
        for round in 0..<rounds {
            for offset in contenders.indices {
                let index = (round + offset) % contenders.count
                samples[index].append(contenders[index].measureRate())
            }
        }
        return all.map { contender in
            let index = contenders.firstIndex { $0 === contender }
            return PeerValue(name: contender.name, value: index.map { LatencyStatistics.median(samples[$0]) } ?? .nan)
        }
    }

}

extension Array where Element == Distribution {
    /// The metric `metric` (p50, p99…) of these distributions: the first is RunLoopKit's.
    func metric(_ caseName: String, _ metric: String, lowerIsBetter: Bool = true,
                targets: [Target] = [], _ pick: (LatencySummary) -> Double) -> MetricResult {
        MetricResult(caseName: caseName, metric: metric, unit: "µs", lowerIsBetter: lowerIsBetter,
                     runloopkit: pick(self[0].summary),
                     peers: dropFirst().map { PeerValue(name: $0.name, value: pick($0.summary)) },
                     targets: targets)
    }

    var briefDescription: String { map { "\($0.name) \($0.summary.brief)" }.joined(separator: "; ") }
}
