import Glibc
import LatencyStatistics
import RunLoopKit

/// `sendRequest` to a named port served by another thread's loop whose handler is
/// `.deferring`: it hands each request's reply right to a `WorkerPool` of one worker,
/// which replies with the request (64 bytes); the reply goes back through the port's
/// owner loop, which sends it. One blocking requester, as in `request-reply`: one request
/// is in flight at a time, so a second worker would take turns with the first, never run
/// beside it (and with the threads of a latency pair on one CPU, see `Placement`, it could
/// not); the pool is created on the requester's thread, so its worker shares that CPU.
final class RunLoopKitDeferredRequestReply: LatencyContender {
    let name = "runloopkit"
    private let driver: CommandThread
    private let server: RunLoopKitThread
    private let pool: WorkerPool
    private let portName = "runloopkit-bench.request-reply-deferred.\(getpid())"

    init(workers: Int = 1) {
        let portName = portName
        let driver = CommandThread()
        let pool = driver.run {
            do { return try WorkerPool(name: "bench-deferred", count: workers) } catch { fatalError("pool: \(error)") }
        }
        server = RunLoopKitThread {
            do {
                let port = try LocalPort(name: portName, handling: .deferring { message, right in
                    guard let right else { return }
                    try pool.perform(moving: right) { right in right.reply(message) }
                })
                ThreadRunLoop.current.add(port, to: .default)
            } catch {
                fatalError("deferring port: \(error)")
            }
        }
        self.driver = driver
        self.pool = pool
    }

    func measure(_ count: Int) -> LatencyHistogram { timeRequests(count, to: portName, on: driver) }

    func finish() {
        driver.finish()
        server.finish()
        pool.stop()
    }
}

enum RequestReplyDeferredCase {
    static let name = "request-reply-deferred"

    static func run(_ config: BenchConfig) -> CaseOutcome {
        let contenders: [any LatencyContender] = [RunLoopKitDeferredRequestReply(), FloorDeferredRequestReply()]
        let distributions = Harness.latencies(contenders, config)
        var outcome = CaseOutcome(name: name, distributions: distributions,
                                  chartCaption: "request/reply answered from a worker, named port, three threads")
        outcome.metrics = [
            distributions.metric(name, "us_p50", targets: [.atMostTimes(1.2, peer: "floor")]) { $0.p50 },
        ]
        return outcome
    }
}
