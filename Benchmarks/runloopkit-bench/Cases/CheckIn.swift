import LatencyStatistics
import RunLoopKit

/// The time until 1,000 worker threads have checked in (`WorkerPool`: each worker creates
/// a port on its own loop and sends it to the creator, the guide's check-in), against
/// 1,000 plain threads that each signal a semaphore once started.
enum CheckInCase {
    static let name = "checkin-1000"
    static let workers = 1000

    static func run(_ config: BenchConfig) -> CaseOutcome {
        System.raiseFileLimit(to: 65536)
        let driver = CommandThread() // the threads it creates inherit its CPU (see Placement)
        defer { driver.finish() }
        let pool = { (count: Int) -> Double in
            driver.run {
                let start = Clock.now()
                let pool: WorkerPool
                do {
                    pool = try WorkerPool(name: "checkin", count: count, checkInTimeout: .seconds(120))
                } catch {
                    fatalError("WorkerPool of \(count): \(error)")
                }
                let seconds = Clock.seconds(since: start)
                precondition(pool.ports.count == count)
                pool.stop()
                return seconds
            }
        }
        let plainThreads = { (count: Int) -> Double in driver.run { PlainThreads.startAll(count) } }
        _ = pool(50) // warm-up
        _ = plainThreads(50)
        var runLoopKit: [Double] = []
        var plain: [Double] = []
        for round in 0..<config.checkInRounds {
            if round % 2 == 0 {
                runLoopKit.append(pool(workers))
                plain.append(plainThreads(workers))
            } else {
                plain.append(plainThreads(workers))
                runLoopKit.append(pool(workers))
            }
        }
        var outcome = CaseOutcome(name: name)
        outcome.metrics = [
            MetricResult(caseName: name, metric: "ms", unit: "ms", lowerIsBetter: true,
                         runloopkit: median(runLoopKit) * 1000,
                         peers: [PeerValue(name: "plain-threads", value: median(plain) * 1000)],
                         targets: [.atMostTimes(2.5, peer: "plain-threads")]),
        ]
        outcome.notes = ["\(name): median of \(config.checkInRounds) interleaved rounds"]
        return outcome
    }
}
