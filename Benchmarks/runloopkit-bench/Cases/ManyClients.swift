import Glibc
import LatencyStatistics
import RunLoopKit

/// 1,000 short-lived requesters: one after the other, a thread is created, looks up a
/// named port served by another thread's loop, sends it one 64-byte request, gets the
/// reply and exits. Reports the request latency (from the lookup to the reply, what a
/// one-shot requester waits), the process's descriptor growth over the 1,000 (counted in
/// /proc/self/fd before and after, the after once the process has been idle for a
/// second), and the process's CPU time over that idle second: a server keeps nothing
/// for a requester that is gone, and an idle process uses no CPU.
enum ManyClientsCase {
    static let name = "request-reply-many-clients"
    static let clients = 1000
    /// Requesters before the first count: what the first of them starts once per process
    /// (the ZeroMQ context's threads, the runtime directory) is not a requester's.
    static let warmUpClients = 10

    /// One requester thread's life: returns its request's latency in nanoseconds.
    static func requester(portName: String) -> UInt64 {
        let latency = Confined<UInt64>(0)
        JoinableThread.start(cpu: Placement.pair) {
            let request = LoopMessage(id: 1, components: [.data([UInt8](repeating: 7, count: 64))])
            let start = Clock.now()
            do {
                let remote = try RemotePort(named: portName)
                let reply = try remote.sendRequest(request, sendTimeout: .seconds(5), receiveTimeout: .seconds(5))
                latency.value = Clock.now() &- start
                precondition(reply.firstData?.count == 64)
            } catch {
                fatalError("many-clients request failed: \(error)")
            }
        }.join() // the join orders the write of `latency` before this read
        return latency.value
    }

    static func run(_ config: BenchConfig) -> CaseOutcome {
        let portName = "runloopkit-bench.many-clients.\(getpid())"
        let server = RunLoopKitThread {
            do {
                let port = try LocalPort(name: portName) { request in request }
                ThreadRunLoop.current.add(port, to: .default)
            } catch {
                fatalError("named port: \(error)")
            }
        }
        defer { server.finish() }
        for _ in 0..<warmUpClients { _ = requester(portName: portName) }
        let descriptorsBefore = System.openDescriptors()
        var recorder = LatencyHistogram()
        for _ in 0..<clients { recorder.record(nanoseconds: requester(portName: portName)) }
        let descriptorsAtOnce = System.openDescriptors()
        let cpuBefore = System.processCPUTime()
        Clock.sleep(seconds: 1)
        let idleCPU = Double(System.processCPUTime() - cpuBefore) / 1e6
        let descriptorsAfter = System.openDescriptors()

        let distributions = [Distribution(name: "runloopkit", summary: LatencySummary(recorder))]
        var outcome = CaseOutcome(name: name, distributions: distributions,
                                  chartCaption: "one request from each of 1,000 new threads")
        outcome.metrics = [
            distributions.metric(name, "us_p50") { $0.p50 },
            distributions.metric(name, "us_p99") { $0.p99 },
            MetricResult(caseName: name, metric: "fd_growth", unit: "", lowerIsBetter: true,
                         runloopkit: Double(descriptorsAfter - descriptorsBefore), targets: [.atMost(0)]),
            MetricResult(caseName: name, metric: "idle_cpu_ms", unit: "ms", lowerIsBetter: true,
                         runloopkit: idleCPU, targets: [.atMost(20)]),
        ]
        outcome.notes = ["\(name): \(clients) requester threads one after the other, after \(warmUpClients) for warm-up; "
                         + "descriptors \(descriptorsBefore) before, \(descriptorsAtOnce) right after the last join, "
                         + "\(descriptorsAfter) after the idle second; idle_cpu_ms is the whole process's CPU over that second"]
        return outcome
    }
}
