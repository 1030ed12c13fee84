import RunLoopKit

/// Worker threads created, handed one `performAndWait` and stopped, one
/// after the other, against plain threads created and joined; and the growth of the
/// resident set over RunLoopKit's cycles (chunks of each, interleaved).
enum ThreadCyclesCase {
    static let name = "thread-cycles"

    static func runLoopKitCycles(_ count: Int) {
        do {
            for _ in 0..<count {
                let worker = try WorkerThread(name: "cycle")
                try worker.performAndWait {}
                worker.stop()
            }
        } catch {
            fatalError("worker cycle: \(error)")
        }
    }

    static func run(_ config: BenchConfig) -> CaseOutcome {
        let driver = CommandThread() // the threads it creates inherit its CPU (see Placement)
        defer { driver.finish() }
        let chunk = config.threadCycleChunk
        let chunks = config.threadCycles / chunk
        // Each chunk: (cycles per second, resident growth in bytes).
        let measure = { (cycles: @escaping @Sendable () -> Void) -> (Double, Double) in
            driver.run {
                let resident = System.residentBytes()
                let start = Clock.now()
                cycles()
                let seconds = Clock.seconds(since: start)
                return (Double(chunk) / seconds, Double(System.residentBytes()) - Double(resident))
            }
        }
        _ = measure { runLoopKitCycles(200) } // warm-up
        _ = measure { _ = PlainThreads.cycles(200) }
        var runLoopKit: [(Double, Double)] = []
        var plain: [(Double, Double)] = []
        for index in 0..<chunks {
            if index % 2 == 0 {
                runLoopKit.append(measure { runLoopKitCycles(chunk) })
                plain.append(measure { _ = PlainThreads.cycles(chunk) })
            } else {
                plain.append(measure { _ = PlainThreads.cycles(chunk) })
                runLoopKit.append(measure { runLoopKitCycles(chunk) })
            }
        }
        // Rates: all cycles over all time (the harmonic mean of the chunks' rates).
        func rate(_ chunks: [(Double, Double)]) -> Double { Double(chunks.count) / chunks.reduce(0) { $0 + 1 / $1.0 } }
        func growthMB(_ chunks: [(Double, Double)]) -> Double { chunks.reduce(0) { $0 + $1.1 } / 1_048_576 }
        var outcome = CaseOutcome(name: name)
        outcome.metrics = [
            MetricResult(caseName: name, metric: "cycles_per_s", unit: "cycle/s", lowerIsBetter: false,
                         runloopkit: rate(runLoopKit), peers: [PeerValue(name: "plain-threads", value: rate(plain))],
                         targets: [.atLeastTimes(0.6, peer: "plain-threads")]),
            MetricResult(caseName: name, metric: "rss_growth_mb", unit: "MB", lowerIsBetter: true,
                         runloopkit: growthMB(runLoopKit),
                         peers: [PeerValue(name: "plain-threads", value: growthMB(plain))], targets: [.atMost(20)]),
        ]
        outcome.notes = ["\(name): \(chunks * chunk) cycles each, in chunks of \(chunk); "
                         + "resident growth is the sum of each chunk's VmRSS change"]
        return outcome
    }
}
