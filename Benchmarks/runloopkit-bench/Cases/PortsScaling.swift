/// The per-message cost of a loop with 1,000 ports, 999 of them idle, against a loop with
/// one: the ping-pong round trip of `port-pingpong-threads` with both loops so equipped.
enum PortsScalingCase {
    static let name = "ports-scaling"

    static func run(_ config: BenchConfig) -> CaseOutcome {
        System.raiseFileLimit(to: 65536)
        let contenders: [any LatencyContender] = [
            RunLoopKitPingPong(name: "1000-ports", idlePorts: 999), RunLoopKitPingPong(name: "1-port"),
        ]
        let distributions = Harness.latencies(contenders, config)
        let many = distributions[0].summary.p50
        let one = distributions[1].summary.p50
        var outcome = CaseOutcome(name: name, distributions: distributions, chartCaption: "round trip, 1,000 ports (999 idle) on each loop vs 1")
        outcome.metrics = [
            MetricResult(caseName: name, metric: "cost_ratio", unit: "×", lowerIsBetter: true, runloopkit: many / one,
                         targets: [.atMost(1.5)]),
            MetricResult(caseName: name, metric: "us_p50", unit: "µs", lowerIsBetter: true, runloopkit: many,
                         peers: [PeerValue(name: "runloopkit-1-port", value: one)]),
        ]
        outcome.notes = ["\(name): round trip p50 with 1,000 ports on each of the two loops (999 idle) "
                         + "÷ with 1; us_p50 is the 1,000-port figure"]
        return outcome
    }
}
