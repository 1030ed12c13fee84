import LatencyStatistics
import RunLoopKit
import Synchronization

/// Ping-pong of a 64-byte message between two RunLoopKit run-loop threads over ports:
/// the driver thread's port handler records the round trip and sends the next ping, while
/// the thread runs its loop (`run(mode:before:)`, as a Foundation thread would); the echo
/// thread's port handler sends each message back. With `idlePorts`, each of the two loops
/// also holds that many ports that never receive anything (`ports-scaling`). With
/// `overTCP`, each port is also bound on tcp loopback and the pings and echoes travel over
/// tcp connections, as `SocketPort`'s do, instead of inproc (see `tcpRemote(binding:)`).
final class RunLoopKitPingPong: LatencyContender {
    let name: String

    /// The driver's side; used on the driver thread only. The fields the handler touches
    /// per round trip skip Swift's dynamic exclusivity check, and the handler captures the
    /// pinger strongly (a cycle through its port, broken by `finish()`'s `invalidate()`,
    /// which drops the handler): read from the closure's context it is borrowed, where an
    /// `unowned(unsafe)` capture is retained and released around each use. So the bench's
    /// own bookkeeping costs what the floor's local variables do.
    private final class Pinger {
        var port: LocalPort?
        @exclusivity(unchecked) var target: RemotePort?
        let message = LoopMessage(id: 1, components: [.data([UInt8](repeating: 7, count: 64))])
        @exclusivity(unchecked) var remaining = 0
        @exclusivity(unchecked) var sentAt: UInt64 = 0
        @exclusivity(unchecked) var recorder = LatencyHistogram()
        var idle: [LocalPort] = []

        func ping() {
            sentAt = Clock.now()
            do {
                try target!.send(message, timeout: .seconds(5))
            } catch {
                fatalError("RunLoopKit ping-pong send failed: \(error)")
            }
        }
    }

    private let driver = CommandThread()
    private let pinger = Confined<Pinger?>(nil)
    private var echo: RunLoopKitThread?

    /// With `portName`, the driver's port is registered under that name (reachable from
    /// another process); with `localEcho` false there is no echo thread: call `connect(to:)`.
    init(name: String = "runloopkit", idlePorts: Int = 0, portName: String? = nil, localEcho: Bool = true,
         overTCP: Bool = false) {
        self.name = name
        let pinger = pinger
        let driverPort: (remote: RemotePort, tcpPort: Int?) = driver.run {
            let state = Pinger()
            let port = RunLoopKitPingPong.makePort(name: portName) { [state] _ in
                state.recorder.record(nanoseconds: Clock.now() &- state.sentAt)
                state.remaining -= 1
                if state.remaining > 0 { state.ping() }
                return nil
            }
            ThreadRunLoop.current.add(port, to: .default)
            state.idle = RunLoopKitPingPong.addIdlePorts(idlePorts)
            state.port = port
            pinger.value = state
            return overTCP ? RunLoopKitPingPong.tcpRemote(binding: port) : (port.remote, nil)
        }
        guard localEcho else { return }
        let echoPort = Mutex<(remote: RemotePort, tcpPort: Int?)?>(nil)
        echo = RunLoopKitThread {
            let port = RunLoopKitPingPong.echoPort(replyingTo: driverPort.remote)
            _ = RunLoopKitPingPong.addIdlePorts(idlePorts) // the loop holds them until the thread exits
            let remote = overTCP ? RunLoopKitPingPong.tcpRemote(binding: port) : (port.remote, nil)
            echoPort.withLock { $0 = remote }
        }
        let echoRemote = echoPort.withLock { $0! }
        connect(to: echoRemote.remote)
        if let driverTCP = driverPort.tcpPort, let echoTCP = echoRemote.tcpPort {
            // A figure for tcp only if the messages went over tcp: one round trip, then
            // both ports must have a connection accepted on them.
            _ = measure(1)
            for tcpPort in [driverTCP, echoTCP] where System.establishedTCPConnections(localPort: tcpPort) == 0 {
                fatalError("\(name): no tcp connection on 127.0.0.1:\(tcpPort); the ping-pong did not go over tcp")
            }
        }
    }

    /// Binds `port` on a free tcp port of 127.0.0.1 (loopback: no CURVE needed) and returns
    /// a handle that reaches it over tcp from this process too, with the port number.
    /// Within a process, a send to the very address a port of it bound
    /// (`tcp://127.0.0.1:N`) is taken over inproc (the port directory's aliases), so the
    /// handle names the host `localhost`, which libzmq resolves to 127.0.0.1 when it
    /// connects: a tcp connection over loopback, as a peer in another process would make.
    static func tcpRemote(binding port: LocalPort) -> (RemotePort, Int?) {
        do {
            let bound = try port.bind(tcp: "tcp://127.0.0.1:*")
            guard let colon = bound.rawValue.lastIndex(of: ":"), let number = Int(bound.rawValue[colon...].dropFirst()) else {
                fatalError("LocalPort.bind(tcp:) returned \(bound)")
            }
            return (RemotePort(try PortAddress(validating: "tcp://localhost:\(number)")), number)
        } catch {
            fatalError("LocalPort.bind(tcp:): \(error)")
        }
    }

    /// Sets the port the pings go to.
    func connect(to target: RemotePort) {
        let pinger = pinger
        driver.run { pinger.value!.target = target }
    }

    /// A port on the calling thread's loop that sends every message it gets to `destination`.
    static func echoPort(name: String? = nil, replyingTo destination: RemotePort) -> LocalPort {
        let port = makePort(name: name) { message in
            do {
                try destination.send(message, timeout: .seconds(5))
            } catch {
                fatalError("RunLoopKit echo send failed: \(error)")
            }
            return nil
        }
        ThreadRunLoop.current.add(port, to: .default)
        return port
    }

    static func makePort(name: String? = nil, _ handler: @escaping LocalPort.Handler) -> LocalPort {
        do {
            return try LocalPort(name: name, handler: handler)
        } catch {
            fatalError("LocalPort: \(error)")
        }
    }

    /// Adds `count` ports without senders to the calling thread's loop.
    static func addIdlePorts(_ count: Int) -> [LocalPort] {
        (0..<count).map { _ in
            let port = makePort { _ in nil }
            ThreadRunLoop.current.add(port, to: .default)
            return port
        }
    }

    func measure(_ count: Int) -> LatencyHistogram {
        let pinger = pinger
        return driver.run {
            let state = pinger.value!
            state.recorder = LatencyHistogram()
            state.remaining = count
            state.ping()
            let loop = ThreadRunLoop.current
            while state.remaining > 0 { loop.run(mode: .default, before: .distantFuture) }
            return state.recorder
        }
    }

    func finish() {
        let pinger = pinger
        driver.run {
            pinger.value?.port?.invalidate()
            pinger.value?.idle.forEach { $0.invalidate() }
            pinger.value = nil
        }
        driver.finish()
        echo?.finish()
    }
}

enum PortPingPongCase {
    static let name = "port-pingpong-threads"

    static func run(_ config: BenchConfig) -> CaseOutcome {
        let contenders: [any LatencyContender] = [
            RunLoopKitPingPong(), FloorPingPong(), ZMQPingPong(name: "zmq-inproc", requestReply: false),
            RunLoopKitPingPong(name: tcpContender, overTCP: true), SocketPortPingPong(), SemaphorePingPong(),
        ]
        let distributions = Harness.latencies(contenders, config)
        // RunLoopKit over inproc beside every peer; RunLoopKit over tcp beside the peer
        // that speaks tcp, `SocketPort` (Foundation's only port on Linux).
        let inproc = distributions.filter { $0.name != tcpContender }
        let tcp = distributions.filter { $0.name == tcpContender } + distributions.filter { $0.name == socketPort }
        var outcome = CaseOutcome(name: name, distributions: distributions, chartCaption: "round trip, 64 B, two threads")
        outcome.metrics = [
            inproc.metric(name, "us_p50", targets: [.atMostTimes(1.15, peer: "floor"),
                                                    .atMostTimes(0.5, peer: socketPort)]) { $0.p50 },
            inproc.metric(name, "us_p99") { $0.p99 },
            tcp.metric(name, "us_p50_tcp") { $0.p50 },
            tcp.metric(name, "us_p99_tcp") { $0.p99 },
        ]
        outcome.notes = ["\(name): us_p50 and us_p99 are RunLoopKit over inproc; us_p50_tcp and us_p99_tcp are "
                         + "\(tcpContender), the same ping-pong over tcp on 127.0.0.1, beside \(socketPort) (TCP too)"]
        return outcome
    }

    /// RunLoopKit's ping-pong over tcp loopback, shown beside `foundation-socketport`.
    static let tcpContender = "runloopkit-tcp"
    static let socketPort = "foundation-socketport"
}
