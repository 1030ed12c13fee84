import CZeroMQ
import Foundation
import Glibc
import RunLoopKit

/// Ping-pong between this process and a child (this executable, `--child pingpong-processes`):
/// RunLoopKit over named ports (ipc), and raw libzmq PAIR sockets over ipc.
enum ProcessPingPongCase {
    static let name = "port-pingpong-processes"
    static let childRole = "pingpong-processes"

    static func run(_ config: BenchConfig) -> CaseOutcome {
        let pid = getpid()
        let parentPort = "runloopkit-bench.parent.\(pid)"
        let childPort = "runloopkit-bench.child.\(pid)"
        let socketPath = "\(NSTemporaryDirectory())runloopkit-bench.\(pid).zmq"
        let endpoint = "ipc://\(socketPath)"
        // The parent's named port exists before the child starts, so the child can find it.
        let runLoopKit = RunLoopKitPingPong(portName: parentPort, localEcho: false)
        let child = ChildProcess(arguments: ["--child", childRole, "--child-port", childPort,
                                             "--parent-port", parentPort, "--endpoint", endpoint]
                                            + (Placement.pair.map { ["--cpu", String($0)] } ?? []))
        do {
            runLoopKit.connect(to: try RemotePort(named: childPort))
        } catch {
            fatalError("the child's port: \(error)")
        }
        let zmq = ZMQPingPong(name: "zmq-ipc", endpoint: endpoint, localEcho: false, requestReply: false)
        let distributions = Harness.latencies([runLoopKit, zmq], config)
        child.finish()
        unlink(socketPath) // the child's ipc socket file (it exits without closing its socket)
        var outcome = CaseOutcome(name: name, distributions: distributions, chartCaption: "round trip, 64 B, two processes (ipc)")
        outcome.metrics = [
            distributions.metric(name, "us_p50", targets: [.atMostTimes(1.25, peer: "zmq-ipc")]) { $0.p50 },
        ]
        return outcome
    }

    /// The child's side: an echo port named `childPort` replying to the parent's named port,
    /// and a raw libzmq PAIR echo bound to `endpoint`. Prints `ready`, then serves until
    /// its standard input closes.
    static func serveAsChild(childPort: String, parentPort: String, endpoint: String) -> Never {
        let echo = RunLoopKitThread {
            do {
                _ = RunLoopKitPingPong.echoPort(name: childPort, replyingTo: try RemotePort(named: parentPort))
            } catch {
                fatalError("child: \(error)")
            }
        }
        let context = RawZMQ.context()
        let socket = RawZMQ.socket(context, ZMQ_PAIR, bind: endpoint)
        let zmqEcho = JoinableThread.start { RawZMQ.echo(on: socket, answeringQuit: false) }
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        while readLine() != nil {}
        _ = (echo, zmqEcho)
        exit(0)
    }
}

/// This executable started again in a child role; its standard input is a pipe whose
/// closing tells it to exit, and it prints `ready` on its standard output once it serves.
final class ChildProcess {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()

    init(arguments: [String]) {
        process.executableURL = URL(fileURLWithPath: System.executablePath)
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        do {
            try process.run()
        } catch {
            fatalError("cannot start the child process: \(error)")
        }
        var seen = Data()
        while !seen.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { fatalError("the child process exited before it was ready") }
            seen.append(chunk)
        }
        guard String(decoding: seen, as: UTF8.self).hasPrefix("ready") else {
            fatalError("the child process said: \(String(decoding: seen, as: UTF8.self))")
        }
    }

    var pid: pid_t { process.processIdentifier }

    /// Writes `line` and a newline to the child's standard input.
    func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    /// The next line the child writes on its standard output, without its newline (read a
    /// byte at a time: nothing after the line is taken from the pipe).
    func readLine() -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        let descriptor = output.fileHandleForReading.fileDescriptor
        while true {
            let count = read(descriptor, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            guard count == 1 else { fatalError("the child process closed its output") }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
    }

    /// Closes the child's input and waits for it to exit.
    func finish() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
