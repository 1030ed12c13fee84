import Dispatch
import RunLoopKit
import Synchronization

/// One-way 64-byte messages from a sending thread into a port serviced by another thread's
/// run loop (`run()`), as fast as the sender can send; per second. The port's handler is
/// an owned one (`LoopMessage`), or with `borrowing` a borrowing one (`LoopMessageView`).
final class RunLoopKitThroughput: RateContender {
    let name: String
    private let sender = CommandThread(cpu: Placement.sender)
    private let receiver: RunLoopKitThread
    private let target: RemotePort
    private let expected = SharedCounter()
    private let received = DispatchSemaphore(value: 0)
    private let messages: Int

    init(messages: Int, borrowing: Bool = false) {
        self.messages = messages
        name = borrowing ? "runloopkit-borrowing" : "runloopkit"
        let (expected, received) = (expected, received)
        let port = Mutex<RemotePort?>(nil)
        receiver = RunLoopKitThread(cpu: Placement.receiver) {
            var count = 0
            let countOne = {
                count += 1
                if count == expected.load() {
                    count = 0
                    received.signal()
                }
            }
            let local = RunLoopKitPingPong.makePort { _ in countOne(); return nil }
            if borrowing {
                local.borrowingHandler = { _ in countOne(); return nil }
            }
            ThreadRunLoop.current.add(local, to: .default)
            port.withLock { $0 = local.remote }
        }
        target = port.withLock { $0! }
    }

    func measureRate() -> Double {
        let (target, messages) = (target, messages)
        expected.store(messages)
        let start = Clock.now()
        sender.run {
            let message = LoopMessage(id: 1, components: [.data([UInt8](repeating: 7, count: 64))])
            do {
                for _ in 0..<messages { try target.send(message, timeout: .seconds(10)) }
            } catch {
                fatalError("RunLoopKit throughput send failed: \(error)")
            }
        }
        received.wait()
        return Double(messages) / Clock.seconds(since: start)
    }

    func finish() {
        sender.finish() // its thread's sockets close as it exits
        receiver.finish()
    }
}

enum PortThroughputCase {
    static let name = "port-throughput-threads"

    static func run(_ config: BenchConfig) -> CaseOutcome {
        let messages = config.throughputMessages
        let rates = Harness.rates([RunLoopKitThroughput(messages: messages), FloorThroughput(messages: messages),
                                   ZMQThroughput(messages: messages),
                                   RunLoopKitThroughput(messages: messages, borrowing: true)],
                                  rounds: config.throughputRounds, only: config.only)
        var outcome = CaseOutcome(name: name)
        outcome.metrics = [
            MetricResult(caseName: name, metric: "msgs_per_s", unit: "msg/s", lowerIsBetter: false,
                         runloopkit: rates[0].value, peers: Array(rates.dropFirst()),
                         targets: [.atLeastTimes(0.7, peer: "zmq-inproc")]),
        ]
        outcome.notes = ["\(name): \(messages) messages per round, median of \(config.throughputRounds) rounds"]
        return outcome
    }
}
