import CZeroMQ
import Foundation
import Glibc
import LatencyStatistics
import RunLoopKit

/// One-way messages from this process to a child (this executable, `--child
/// throughput-processes`), in which every sender writes every byte of each message and
/// every receiver reads every byte (`Payload`): large payloads at 64 KiB, 1 MiB and
/// 16 MiB in bytes per second, and small ones at 16 B and 1 KiB in messages per second.
/// Contenders, all between the same two processes: `runloopkit` (a `RemotePort` sending
/// each message filled in place to a named port of the child, whose borrowing handler
/// reads the bytes in place),
/// `zmq-ipc` (raw libzmq PUSH to PULL over ipc, each message filled in place in its
/// `zmq_msg_t` and read in place) and `floor-shm` (`SharedMemoryRing`).
///
/// A round is a contender's `messages` messages; it is timed from the first send to the
/// child's word that its receiver read the round's last byte. Before each round the
/// parent tells the child how many bytes to expect and waits for its `ok`, on the child's
/// standard input and output (a line each way; nothing on the measured path).
enum ProcessThroughputCase {
    static let name = "port-throughput-processes"
    static let childRole = "throughput-processes"
    /// The large payloads, in bytes per second, with the targets.
    static let large: [(bytes: Int, label: String, timesZMQ: Double)] = [
        (64 << 10, "64KiB", 3), (1 << 20, "1MiB", 1.5), (16 << 20, "16MiB", 1.5),
    ]
    /// The small payloads, in messages per second, for information: the shared-memory path
    /// must leave them as they are.
    static let small: [(bytes: Int, label: String)] = [(16, "16B"), (1024, "1KiB")]
    /// The contenders' indices in the child's table of expected bytes.
    static let contenders = ["runloopkit", "zmq-ipc", "floor-shm"]

    static func roundBytes(_ config: BenchConfig) -> Int { config.quick ? 64 << 20 : 256 << 20 }

    static func run(_ config: BenchConfig) -> CaseOutcome {
        let pid = getpid()
        let childPort = "runloopkit-bench.throughput.\(pid)"
        let socketPath = "\(NSTemporaryDirectory())runloopkit-bench.\(pid).throughput.zmq"
        let ringPath = "\(NSTemporaryDirectory())runloopkit-bench.\(pid).ring"
        let child = ChildProcess(arguments: ["--child", childRole, "--child-port", childPort,
                                             "--endpoint", "ipc://\(socketPath)", "--ring-socket", ringPath]
                                            + (Placement.receiver.map { ["--cpu", String($0)] } ?? []))
        defer {
            child.finish()
            unlink(socketPath)
            unlink(ringPath)
        }
        let target: RemotePort
        do {
            target = try RemotePort(named: childPort)
        } catch {
            fatalError("the child's port: \(error)")
        }
        var outcome = CaseOutcome(name: name)
        let sizes = large.map { ($0.bytes, "bytes_per_s_\($0.label)", $0.timesZMQ) } + small.map { ($0.bytes, "msgs_per_s_\($0.label)", 0) }
        for (payload, metric, timesZMQ) in sizes {
            let isLarge = timesZMQ > 0
            let messages = isLarge ? roundBytes(config) / payload : config.throughputMessages
            let streams = [
                ProcessStream(.runLoopKit(target), child: child, payload: payload, messages: messages, perByte: isLarge),
                ProcessStream(.zmq("ipc://\(socketPath)"), child: child, payload: payload, messages: messages, perByte: isLarge),
                ProcessStream(.ring(ringPath), child: child, payload: payload, messages: messages, perByte: isLarge),
            ]
            let rates = Harness.rates(streams, rounds: config.throughputRounds, only: config.only)
            outcome.metrics.append(MetricResult(
                caseName: name, metric: metric, unit: isLarge ? "B/s" : "msg/s", lowerIsBetter: false,
                runloopkit: rates[0].value, peers: Array(rates.dropFirst()),
                targets: isLarge ? [.atLeastTimes(0.8, peer: "floor-shm"), .atLeastTimes(timesZMQ, peer: "zmq-ipc")] : []))
        }
        outcome.metrics += sendToHandler(target, child: child, config)
        outcome.notes = ["\(name): \(roundBytes(config) >> 20) MiB per round at 64 KiB-16 MiB, "
                         + "\(config.throughputMessages) messages at 16 B and 1 KiB; median of \(config.throughputRounds) rounds; "
                         + "every byte written by the sender and read by the receiver"]
        return outcome
    }

    // MARK: From send to handler

    /// The sizes whose time from send to handler is compared (the issue: 4 MiB within 2 ×
    /// 64 KiB), and the message id of such a probe.
    static let probeSizes: [(bytes: Int, label: String)] = [(64 << 10, "64KiB"), (4 << 20, "4MiB")]
    static let probeID: Int32 = 2

    /// One component at a time, filled in place by a sender on the stream's CPU: its
    /// first word the clock when the send began, its second the clock when the fill ended
    /// (the rest the payload's words); the child's handler reads the clock as it starts and
    /// writes both differences on its standard output, which the parent reads before the
    /// next probe. `us_p50_filled_to_handler_4MiB`, what the transport adds once the bytes
    /// are written, has the target (≤ 2 × the same at 64 KiB); `us_p50_send_to_handler_4MiB`,
    /// the fill included (4 MiB written at memory speed), is information.
    static func sendToHandler(_ target: RemotePort, child: ChildProcess, _ config: BenchConfig) -> [MetricResult] {
        let sender = CommandThread(cpu: Placement.sender)
        defer { sender.finish() }
        let probes = config.quick ? 50 : 200
        var filled: [String: LatencySummary] = [:]
        var whole: [String: LatencySummary] = [:]
        for (bytes, label) in probeSizes {
            var fromFill = LatencyHistogram()
            var fromSend = LatencyHistogram()
            for index in 0..<(probes + 20) { // the first 20 warm up, the ring's welcome among them
                sender.run {
                    do {
                        try target.send(id: probeID, byteCount: bytes, timeout: .seconds(30)) { buffer in
                            let start = Clock.now()
                            let base = buffer.baseAddress.unsafelyUnwrapped
                            Payload.fill(base, byteCount: bytes, seed: UInt64(index))
                            base.storeBytes(of: start, toByteOffset: 0, as: UInt64.self)
                            base.storeBytes(of: Clock.now(), toByteOffset: 8, as: UInt64.self)
                        }
                    } catch {
                        fatalError("RunLoopKit probe send failed: \(error)")
                    }
                }
                let fields = child.readLine().split(separator: " ")
                guard fields.count == 3, fields[0] == "L", let sinceSend = UInt64(fields[1]), let sinceFill = UInt64(fields[2]) else {
                    fatalError("the child did not time the probe")
                }
                if index >= 20 {
                    fromSend.record(nanoseconds: sinceSend)
                    fromFill.record(nanoseconds: sinceFill)
                }
            }
            filled[label] = LatencySummary(fromFill)
            whole[label] = LatencySummary(fromSend)
        }
        return [
            MetricResult(caseName: name, metric: "us_p50_filled_to_handler_4MiB", unit: "µs", lowerIsBetter: true,
                         runloopkit: filled["4MiB"]!.p50, peers: [PeerValue(name: "64KiB", value: filled["64KiB"]!.p50)],
                         targets: [.atMostTimes(2, peer: "64KiB")]),
            MetricResult(caseName: name, metric: "us_p50_send_to_handler_4MiB", unit: "µs", lowerIsBetter: true,
                         runloopkit: whole["4MiB"]!.p50, peers: [PeerValue(name: "64KiB", value: whole["64KiB"]!.p50)]),
        ]
    }

    // MARK: The child

    /// The child's side: the three receivers, each checking every payload and counting its
    /// bytes; a line `INDEX BYTES` on standard input sets the bytes contender INDEX's next
    /// round holds (answered `ok`), and the receiver says `done` once it has read them.
    static func serveAsChild(childPort: String, endpoint: String, ringPath: String) -> Never {
        let tallies = contenders.map { _ in RoundTally() }
        let port = RunLoopKitThread(cpu: nil) { // the whole child is pinned already (--cpu)
            let tally = tallies[0]
            let local = RunLoopKitPingPong.makePort(name: childPort) { _ in nil }
            local.handler = .borrowing { view in
                if view.id == probeID, let bytes = view.firstData { // a probe (`sendToHandler`): timed, not tallied
                    let now = Clock.now()
                    say("L \(now &- bytes.loadUnaligned(as: UInt64.self)) \(now &- bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))")
                    return nil
                }
                if let bytes = view.firstData {
                    Payload.check(bytes)
                    tally.add(bytes.count)
                }
                return nil
            }
            ThreadRunLoop.current.add(local, to: .default)
        }
        let context = RawZMQ.context()
        let pull = RawZMQ.socket(context, ZMQ_PULL, bind: endpoint)
        let zmqReceiver = JoinableThread.start {
            let message = UnsafeMutablePointer<zmq_msg_t>.allocate(capacity: 1)
            zmq_msg_init(message)
            while true {
                while zmq_msg_recv(message, pull.raw, 0) < 0 {
                    guard zmq_errno() == EINTR else { fatalError("zmq_msg_recv: \(RawZMQ.errorText)") }
                }
                let bytes = UnsafeRawBufferPointer(start: zmq_msg_data(message), count: zmq_msg_size(message))
                Payload.check(bytes)
                tallies[1].add(bytes.count)
            }
        }
        let ringSocket = Kernelish.datagramSocket(boundTo: ringPath)
        let ringReceiver = JoinableThread.start {
            while true { // a ring per payload size, one after the other
                let (words, descriptors) = Kernelish.receive(wordCount: 3, descriptorCount: 3, on: ringSocket)
                guard descriptors.count == 3, let ring = SharedMemoryRing(
                    memory: descriptors[0], ready: descriptors[1], freed: descriptors[2],
                    slotCount: Int(words[0]), stride: Int(words[1]), payload: Int(words[2]))
                else { fatalError("child: a ring whose layout does not fit its memfd") }
                while ring.receive({ bytes in
                    Payload.check(bytes)
                    tallies[2].add(bytes.count)
                }) {}
            }
        }
        say("ready")
        while let line = readLine() {
            let fields = line.split(separator: " ").compactMap { Int($0) }
            guard fields.count == 2, tallies.indices.contains(fields[0]) else { fatalError("child: '\(line)'") }
            tallies[fields[0]].expect(fields[1])
            say("ok")
        }
        _ = (port, zmqReceiver, ringReceiver)
        exit(0)
    }

    /// A line on standard output, in one `write(2)`.
    static func say(_ line: String) {
        var bytes = Array((line + "\n").utf8)
        _ = write(1, &bytes, bytes.count)
    }

    /// A receiver's count of the bytes of the current round. Receiving thread only, but
    /// `expected`, set by the child's main thread before the round starts.
    final class RoundTally: @unchecked Sendable {
        @exclusivity(unchecked) private var count = 0
        private let expected = SharedCounter()

        func expect(_ bytes: Int) { expected.store(bytes) }

        @inline(__always)
        func add(_ bytes: Int) {
            count += bytes
            if count >= expected.load() {
                count = 0
                say("done")
            }
        }
    }
}

/// One contender of `port-throughput-processes`: its sending thread (pinned to the
/// stream's sender CPU) and how it sends; the receiver is the child's.
final class ProcessStream: RateContender {
    enum Kind {
        case runLoopKit(RemotePort)
        case zmq(String)
        case ring(String)
    }

    let name: String
    private let index: Int
    private let child: ChildProcess
    private let payload: Int
    private let messages: Int
    private let perByte: Bool
    private let sender = CommandThread(cpu: Placement.sender)
    private let send: @Sendable () -> Void
    private let close: @Sendable () -> Void

    /// `perByte`: the rate is bytes per second, else messages per second.
    init(_ kind: Kind, child: ChildProcess, payload: Int, messages: Int, perByte: Bool) {
        (self.child, self.payload, self.messages, self.perByte) = (child, payload, messages, perByte)
        // The sequence number seeds each payload; the sender's alone, in a box it alone uses.
        let sequence = Confined<UInt64>(0)
        switch kind {
        case .runLoopKit(let target):
            (name, index) = ("runloopkit", 0)
            // Each message filled in place in the frame libzmq sends
            // (`send(id:byteCount:timeout:filling:)`): from 64 KiB on a frame of its own, below
            // it the message frame after its 27-byte header, where words are unaligned.
            let aligned = payload >= 64 << 10
            send = {
                do {
                    for _ in 0..<messages {
                        let seed = sequence.value
                        try target.send(id: 1, byteCount: payload, timeout: .seconds(30)) { buffer in
                            let base = buffer.baseAddress.unsafelyUnwrapped
                            if aligned {
                                Payload.fill(base, byteCount: payload, seed: seed)
                            } else {
                                Payload.fillUnaligned(base, byteCount: payload, seed: seed)
                            }
                        }
                        sequence.value &+= 1
                    }
                } catch {
                    fatalError("RunLoopKit send failed: \(error)")
                }
            }
            close = {}
        case .zmq(let endpoint):
            (name, index) = ("zmq-ipc", 1)
            let context = RawZMQ.context()
            let push = sender.run { RawZMQ.socket(context, ZMQ_PUSH, connect: endpoint) }
            let message = Confined(UnsafeMutablePointer<zmq_msg_t>.allocate(capacity: 1))
            send = {
                for _ in 0..<messages { // filled in place in the message libzmq sends
                    guard zmq_msg_init_size(message.value, payload) == 0 else { fatalError("zmq_msg_init_size") }
                    Payload.fill(zmq_msg_data(message.value), byteCount: payload, seed: sequence.value)
                    sequence.value &+= 1
                    while zmq_msg_send(message.value, push.raw, 0) < 0 {
                        guard zmq_errno() == EINTR else { fatalError("zmq_msg_send: \(RawZMQ.errorText)") }
                    }
                }
            }
            close = {
                RawZMQ.close(push)
                RawZMQ.terminate(context)
                message.value.deallocate()
            }
        case .ring(let path):
            (name, index) = ("floor-shm", 2)
            let ring = SharedMemoryRing(payload: payload)
            let socket = Kernelish.datagramSocket()
            Kernelish.send([UInt64(ring.slotCount), UInt64(ring.stride), UInt64(payload)],
                           descriptors: [ring.memory, ring.ready, ring.freed], on: socket, to: path)
            Glibc.close(socket)
            send = {
                for _ in 0..<messages {
                    ring.send { Payload.fill($0, byteCount: payload, seed: sequence.value) }
                    sequence.value &+= 1
                }
            }
            close = { ring.close() }
        }
    }

    func measureRate() -> Double {
        child.send("\(index) \(messages * payload)")
        guard child.readLine() == "ok" else { fatalError("the child did not take the round") }
        let start = Clock.now()
        sender.run(send)
        guard child.readLine() == "done" else { fatalError("the child did not finish the round") }
        let seconds = Clock.seconds(since: start)
        return Double(perByte ? messages * payload : messages) / seconds
    }

    func finish() {
        sender.run(close)
        sender.finish()
    }
}
