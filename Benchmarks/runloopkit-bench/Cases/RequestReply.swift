import Glibc
import LatencyStatistics
import RunLoopKit

/// `sendRequest` to a named port served by another thread's loop, whose handler returns
/// the request (64 bytes) as the reply; the requesting thread's loop runs in the private
/// reply mode while it waits.
final class RunLoopKitRequestReply: LatencyContender {
    let name = "runloopkit"
    private let driver = CommandThread()
    private let server: RunLoopKitThread
    private let portName = "runloopkit-bench.request-reply.\(getpid())"

    init() {
        let portName = portName
        server = RunLoopKitThread {
            do {
                let port = try LocalPort(name: portName) { request in request }
                ThreadRunLoop.current.add(port, to: .default)
            } catch {
                fatalError("named port: \(error)")
            }
        }
    }

    func measure(_ count: Int) -> LatencyHistogram { timeRequests(count, to: portName, on: driver) }

    func finish() {
        driver.finish()
        server.finish()
    }
}

/// Times `count` blocking requests (64 bytes, `sendRequest`) to the port named `portName`,
/// whose server sends each back, from `driver`'s thread: `request-reply`'s and
/// `request-reply-deferred`'s requester.
func timeRequests(_ count: Int, to portName: String, on driver: CommandThread) -> LatencyHistogram {
    driver.run {
        var recorder = LatencyHistogram()
        let request = LoopMessage(id: 1, components: [.data([UInt8](repeating: 7, count: 64))])
        do {
            let remote = try RemotePort(named: portName)
            for _ in 0..<count {
                let start = Clock.now()
                let reply = try remote.sendRequest(request, sendTimeout: .seconds(5), receiveTimeout: .seconds(5))
                recorder.record(nanoseconds: Clock.now() &- start)
                precondition(reply.firstData?.count == 64)
            }
        } catch {
            fatalError("request/reply to \(portName) failed: \(error)")
        }
        return recorder
    }
}

enum RequestReplyCase {
    static let name = "request-reply"

    static func run(_ config: BenchConfig) -> CaseOutcome {
        let contenders: [any LatencyContender] = [
            RunLoopKitRequestReply(), FloorRequestReply(), ZMQPingPong(name: "zmq-inproc-reqrep", requestReply: true),
        ]
        let distributions = Harness.latencies(contenders, config)
        var outcome = CaseOutcome(name: name, distributions: distributions, chartCaption: "request/reply, named port, two threads")
        outcome.metrics = [
            distributions.metric(name, "us_p50", targets: [.atMostTimes(1.15, peer: "floor")]) { $0.p50 },
        ]
        return outcome
    }
}
