import CZeroMQ
import Glibc
import LatencyStatistics
import Synchronization

// The raw-libzmq peers: libzmq called through `CZeroMQ` directly, with blocking calls and
// a context of their own. No RunLoopKit code is on their path.

/// A libzmq context or socket handle, moved between threads only where a semaphore or a
/// join orders the uses (libzmq sockets are not thread-safe; these are used by one thread at a time).
struct ZMQHandle: @unchecked Sendable {
    let raw: UnsafeMutableRawPointer
}

enum RawZMQ {
    static func context() -> ZMQHandle {
        guard let context = zmq_ctx_new() else { fatalError("zmq_ctx_new failed") }
        return ZMQHandle(raw: context)
    }

    static func terminate(_ context: ZMQHandle) {
        while zmq_ctx_term(context.raw) != 0 && zmq_errno() == EINTR {}
    }

    /// A socket bound (`bind`) or connected to `endpoint`, with a short linger.
    static func socket(_ context: ZMQHandle, _ type: Int32, bind endpoint: String? = nil,
                       connect target: String? = nil) -> ZMQHandle {
        guard let socket = zmq_socket(context.raw, type) else { fatalError("zmq_socket: \(errorText)") }
        var linger: Int32 = 100
        zmq_setsockopt(socket, ZMQ_LINGER, &linger, MemoryLayout<Int32>.size)
        if let endpoint, zmq_bind(socket, endpoint) != 0 { fatalError("zmq_bind \(endpoint): \(errorText)") }
        if let target, zmq_connect(socket, target) != 0 { fatalError("zmq_connect \(target): \(errorText)") }
        return ZMQHandle(raw: socket)
    }

    static func close(_ socket: ZMQHandle) { zmq_close(socket.raw) }

    /// `zmq_send` of `count` bytes, blocking; retried on EINTR.
    @inline(__always)
    static func send(_ socket: ZMQHandle, _ buffer: UnsafeMutableRawPointer, _ count: Int) {
        while zmq_send(socket.raw, buffer, count, 0) < 0 {
            guard zmq_errno() == EINTR else { fatalError("zmq_send: \(errorText)") }
        }
    }

    /// `zmq_recv` into `buffer`, blocking; returns the message size.
    @inline(__always)
    static func receive(_ socket: ZMQHandle, _ buffer: UnsafeMutableRawPointer, _ capacity: Int) -> Int {
        while true {
            let size = zmq_recv(socket.raw, buffer, capacity, 0)
            if size >= 0 { return Int(size) }
            guard zmq_errno() == EINTR else { fatalError("zmq_recv: \(errorText)") }
        }
    }

    static var errorText: String { String(cString: zmq_strerror(zmq_errno())) }

    /// The echo side of the ping-pong and request/reply peers: receives and sends each
    /// message back, until an empty message (which it does not answer on a PAIR socket;
    /// a REP socket must answer, so it does).
    static func echo(on socket: ZMQHandle, answeringQuit: Bool) {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let size = receive(socket, buffer, 4096)
            if size == 0 {
                if answeringQuit { send(socket, buffer, 0) }
                return
            }
            send(socket, buffer, min(size, 4096))
        }
    }
}

/// Round trips of a 64-byte message over a pair of libzmq sockets with blocking calls:
/// `zmq-inproc` (PAIR/PAIR between threads), `zmq-inproc-reqrep` (REQ/REP), and
/// `zmq-ipc` (PAIR to another process, whose echo runs in the child; see `ProcessPeer`).
final class ZMQPingPong: LatencyContender {
    let name: String
    private let context: ZMQHandle
    private let driver = CommandThread()
    private let client: ZMQHandle
    private let echoThread: JoinableThread?
    private let payload: Int
    private let answersQuit: Bool

    /// Between two threads of this process, over inproc.
    convenience init(name: String, requestReply: Bool, payload: Int = 64) {
        self.init(name: name, endpoint: "inproc://runloopkit-bench.\(name)", localEcho: true,
                  requestReply: requestReply, payload: payload)
    }

    /// `localEcho` false: the echo is another process's, already bound to `endpoint`.
    init(name: String, endpoint: String, localEcho: Bool, requestReply: Bool, payload: Int = 64) {
        self.name = name
        self.payload = payload
        answersQuit = requestReply
        let context = RawZMQ.context()
        self.context = context
        if localEcho {
            let server = RawZMQ.socket(context, requestReply ? ZMQ_REP : ZMQ_PAIR, bind: endpoint)
            echoThread = JoinableThread.start(cpu: Placement.pair) {
                RawZMQ.echo(on: server, answeringQuit: requestReply)
                RawZMQ.close(server)
            }
        } else {
            echoThread = nil
        }
        client = driver.run { RawZMQ.socket(context, requestReply ? ZMQ_REQ : ZMQ_PAIR, connect: endpoint) }
    }

    func measure(_ count: Int) -> LatencyHistogram {
        let (client, payload) = (client, payload)
        return driver.run {
            var recorder = LatencyHistogram()
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 16)
            defer { buffer.deallocate() }
            buffer.initializeMemory(as: UInt8.self, repeating: 7, count: payload)
            for _ in 0..<count {
                let start = Clock.now()
                RawZMQ.send(client, buffer, payload)
                _ = RawZMQ.receive(client, buffer, 4096)
                recorder.record(nanoseconds: Clock.now() &- start)
            }
            return recorder
        }
    }

    /// Tells a local echo to quit (a remote one quits with its process), closes, joins.
    func finish() {
        let (client, answersQuit, local) = (client, answersQuit, echoThread != nil)
        driver.run {
            if local {
                var empty: UInt8 = 0
                RawZMQ.send(client, &empty, 0)
                if answersQuit { _ = RawZMQ.receive(client, &empty, 1) }
            }
            RawZMQ.close(client)
        }
        driver.finish()
        echoThread?.join()
        RawZMQ.terminate(context)
    }
}

/// One-way messages (64 bytes unless told) from a PUSH socket to a PULL socket, both blocking: the
/// `zmq-inproc` peer of `port-throughput-threads`.
final class ZMQThroughput: RateContender {
    let name = "zmq-inproc"
    private let context = RawZMQ.context()
    private let sender = CommandThread(cpu: Placement.sender)
    private let receiver = CommandThread(cpu: Placement.receiver)
    private let push: ZMQHandle
    private let pull: ZMQHandle
    private let messages: Int

    private let payload: Int
    private static let serial = Atomic<Int>(0)

    init(messages: Int, payload: Int = 64) {
        self.messages = messages
        self.payload = payload
        let context = context
        let endpoint = "inproc://runloopkit-bench.throughput.\(ZMQThroughput.serial.add(1, ordering: .relaxed).newValue)"
        pull = receiver.run { RawZMQ.socket(context, ZMQ_PULL, bind: endpoint) }
        push = sender.run { RawZMQ.socket(context, ZMQ_PUSH, connect: endpoint) }
    }

    func measureRate() -> Double {
        let (push, pull, messages, payload) = (push, pull, messages, payload)
        let start = Clock.now()
        receiver.start {
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: payload, alignment: 16)
            defer { buffer.deallocate() }
            for _ in 0..<messages { _ = RawZMQ.receive(pull, buffer, payload) }
        }
        sender.run {
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: payload, alignment: 16)
            defer { buffer.deallocate() }
            buffer.initializeMemory(as: UInt8.self, repeating: 7, count: payload)
            for _ in 0..<messages { RawZMQ.send(push, buffer, payload) }
        }
        receiver.wait()
        return Double(messages) / Clock.seconds(since: start)
    }

    func finish() {
        let (push, pull) = (push, pull)
        sender.run { RawZMQ.close(push) }
        receiver.run { RawZMQ.close(pull) }
        sender.finish()
        receiver.finish()
        RawZMQ.terminate(context)
    }
}
