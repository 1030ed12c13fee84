import Dispatch
import RunLoopKit
import Synchronization

/// One-way messages (64 bytes unless told) from a sending thread into a port serviced by
/// another thread's run loop (`run()`), as fast as the sender can send; per second. The
/// port's handler is an owned one (`LoopMessage`), or with `borrowing` a borrowing one
/// (`LoopMessageView`).
final class RunLoopKitThroughput: RateContender {
    let name: String
    private let sender = CommandThread(cpu: Placement.sender)
    private let receiver: RunLoopKitThread
    private let target: RemotePort
    private let expected = SharedCounter()
    private let received = DispatchSemaphore(value: 0)
    private let messages: Int
    private let payload: Int

    init(messages: Int, payload: Int = 64, borrowing: Bool = false) {
        self.messages = messages
        self.payload = payload
        name = borrowing ? "runloopkit-borrowing" : "runloopkit"
        let (expected, received) = (expected, received)
        let port = Mutex<RemotePort?>(nil)
        receiver = RunLoopKitThread(cpu: Placement.receiver) {
            let tally = Tally(expected: expected, received: received)
            let local = RunLoopKitPingPong.makePort { _ in tally.countOne(); return nil }
            if borrowing {
                local.handler = .borrowing { _ in tally.countOne(); return nil }
            }
            ThreadRunLoop.current.add(local, to: .default)
            port.withLock { $0 = local.remote }
        }
        target = port.withLock { $0! }
    }

    /// The receiving handler's count of a round's messages. Its count skips Swift's
    /// dynamic exclusivity check (a captured `var` would pay it on every message), so
    /// that the bench's own bookkeeping costs what the peers' local counters do.
    /// Receiving thread only.
    private final class Tally {
        @exclusivity(unchecked) private var count = 0
        private let expected: SharedCounter
        private let received: DispatchSemaphore

        init(expected: SharedCounter, received: DispatchSemaphore) {
            self.expected = expected
            self.received = received
        }

        func countOne() {
            count += 1
            if count == expected.load() {
                count = 0
                received.signal()
            }
        }
    }

    func measureRate() -> Double {
        let (target, messages, payload) = (target, messages, payload)
        expected.store(messages)
        let start = Clock.now()
        sender.run {
            let message = LoopMessage(id: 1, components: [.data([UInt8](repeating: 7, count: payload))])
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
                                   FloorThroughput(messages: messages, wireFormat2: true),
                                   ZMQThroughput(messages: messages),
                                   RunLoopKitThroughput(messages: messages, borrowing: true)],
                                  rounds: config.throughputRounds, only: config.only)
        let (owned, floor, floorV2, zmq, borrowing) = (rates[0], rates[1], rates[2], rates[3], rates[4])
        var outcome = CaseOutcome(name: name)
        outcome.metrics = [
            MetricResult(caseName: name, metric: "msgs_per_s", unit: "msg/s", lowerIsBetter: false,
                         runloopkit: owned.value, peers: [floor, floorV2, zmq, borrowing],
                         targets: [.atLeastTimes(0.5, peer: "zmq-inproc")]),
            MetricResult(caseName: name, metric: "msgs_per_s_borrowing", unit: "msg/s", lowerIsBetter: false,
                         runloopkit: borrowing.value, peers: [floor, floorV2, zmq],
                         targets: [.atLeastTimes(0.7, peer: "zmq-inproc")]),
        ]
        outcome.notes = ["\(name): \(messages) messages per round, median of \(config.throughputRounds) rounds; "
                         + "msgs_per_s_borrowing is the same stream into a borrowing handler; floor-v2 is the floor "
                         + "sending wire format 2's three frames (21-byte header, empty reply address, data)"]
        return outcome
    }
}

/// `port-throughput-threads` at other payloads, each beside raw libzmq at the same payload:
/// glibc's allocator treats libzmq's frames differently by size (over ~80 bytes they leave
/// its fast bins), so one size says little.
enum PortThroughputSizesCase {
    static let name = "port-throughput-sizes"
    static let payloads = [16, 256, 1024]

    static func run(_ config: BenchConfig) -> CaseOutcome {
        let messages = config.throughputMessages
        var outcome = CaseOutcome(name: name)
        for payload in payloads {
            let rates = Harness.rates([RunLoopKitThroughput(messages: messages, payload: payload),
                                       ZMQThroughput(messages: messages, payload: payload),
                                       RunLoopKitThroughput(messages: messages, payload: payload, borrowing: true)],
                                      rounds: config.throughputRounds, only: config.only)
            outcome.metrics.append(MetricResult(caseName: name, metric: "msgs_per_s_\(payload)B", unit: "msg/s",
                                                lowerIsBetter: false, runloopkit: rates[0].value,
                                                peers: Array(rates.dropFirst())))
        }
        outcome.notes = ["\(name): \(messages) messages per round and payload, median of \(config.throughputRounds) rounds"]
        return outcome
    }
}
