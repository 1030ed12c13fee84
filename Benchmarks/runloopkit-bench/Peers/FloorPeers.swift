import CLinuxPoll
import CZeroMQ
import Glibc

// The `floor` peers: RunLoopKit's own design with no run-loop machinery. Each thread
// sleeps in epoll on its socket's `ZMQ_FD` and, after every wake-up, receives with
// `ZMQ_DONTWAIT` until libzmq says nothing is queued, exactly as a run loop services a
// port; its threads are placed as RunLoopKit's are. What RunLoopKit costs above these is
// run-loop machinery (modes, observers, the pass, the wire format, the port tables).

/// A socket's `ZMQ_FD` in an epoll set of its own, and receives that sleep there.
struct FloorSocket: @unchecked Sendable {
    let socket: ZMQHandle
    private let epoll: Int32

    init(_ socket: ZMQHandle) {
        self.socket = socket
        var fd: Int32 = -1
        var size = MemoryLayout<Int32>.size
        guard zmq_getsockopt(socket.raw, ZMQ_FD, &fd, &size) == 0 else { fatalError("ZMQ_FD: \(RawZMQ.errorText)") }
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        guard epoll >= 0, epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) == 0 else { fatalError("epoll: \(errno)") }
    }

    /// One frame, received without blocking; asleep in epoll whenever none is queued.
    /// `more` tells whether another frame of the same message follows.
    @inline(__always)
    func receive(_ buffer: UnsafeMutableRawPointer, _ capacity: Int) -> (size: Int, more: Bool) {
        while true {
            let size = zmq_recv(socket.raw, buffer, capacity, ZMQ_DONTWAIT)
            if size >= 0 {
                var more: Int32 = 0
                var length = MemoryLayout<Int32>.size
                zmq_getsockopt(socket.raw, ZMQ_RCVMORE, &more, &length)
                return (Int(size), more != 0)
            }
            let code = zmq_errno()
            guard code == EAGAIN || code == EINTR else { fatalError("zmq_recv: \(RawZMQ.errorText)") }
            if code == EAGAIN {
                var event = epoll_event()
                _ = epoll_wait(epoll, &event, 1, -1)
            }
        }
    }

    /// Sends one frame, blocking (the peer always has room in these cases).
    @inline(__always)
    func send(_ buffer: UnsafeRawPointer, _ count: Int, more: Bool = false) {
        while zmq_send(socket.raw, buffer, count, more ? ZMQ_SNDMORE : 0) < 0 {
            guard zmq_errno() == EINTR else { fatalError("zmq_send: \(RawZMQ.errorText)") }
        }
    }

    func close() {
        Glibc.close(epoll)
        RawZMQ.close(socket)
    }
}

/// `floor` for `port-pingpong-threads` (a DEALER pinging a ROUTER echo, as a RunLoopKit
/// sender's connection reaches a port) and for `request-reply` (the same exchange: a
/// RunLoopKit request and its reply travel exactly so).
final class FloorPingPong: LatencyContender {
    let name = "floor"
    private let context = RawZMQ.context()
    private let driver = CommandThread()
    private let client: FloorSocket
    private let echoThread: JoinableThread

    init(endpoint: String = "inproc://runloopkit-bench.floor") {
        let context = context
        let server = FloorSocket(RawZMQ.socket(context, ZMQ_ROUTER, bind: endpoint))
        echoThread = JoinableThread.start(cpu: Placement.pair) {
            let identity = UnsafeMutableRawPointer.allocate(byteCount: 256, alignment: 16)
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 16)
            defer {
                identity.deallocate()
                buffer.deallocate()
                server.close()
            }
            while true {
                let (idSize, _) = server.receive(identity, 256)
                let (size, _) = server.receive(buffer, 4096)
                if size == 0 { return }
                server.send(identity, idSize, more: true) // back over the connection it came in on
                server.send(buffer, size)
            }
        }
        client = driver.run { FloorSocket(RawZMQ.socket(context, ZMQ_DEALER, connect: endpoint)) }
    }

    func measure(_ count: Int) -> LatencyRecorder {
        let client = client
        return driver.run {
            var recorder = LatencyRecorder()
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 16)
            defer { buffer.deallocate() }
            buffer.initializeMemory(as: UInt8.self, repeating: 7, count: 64)
            for _ in 0..<count {
                let start = Clock.now()
                client.send(buffer, 64)
                _ = client.receive(buffer, 4096)
                recorder.record(nanoseconds: Clock.now() &- start)
            }
            return recorder
        }
    }

    func finish() {
        let client = client
        driver.run {
            var empty: UInt8 = 0
            client.send(&empty, 0)
            client.close()
        }
        driver.finish()
        echoThread.join()
        RawZMQ.terminate(context)
    }
}

/// `floor` for `port-throughput-threads`: a DEALER sending 64-byte messages to a ROUTER
/// whose thread sleeps in epoll and drains after each wake-up, placed as RunLoopKit's are.
final class FloorThroughput: RateContender {
    let name = "floor"
    private let context = RawZMQ.context()
    private let sender = CommandThread(cpu: Placement.sender)
    private let receiver = CommandThread(cpu: Placement.receiver)
    private let dealer: FloorSocket
    private let router: FloorSocket
    private let messages: Int

    init(messages: Int) {
        self.messages = messages
        let context = context
        let endpoint = "inproc://runloopkit-bench.floor-throughput"
        // RunLoopKit's queue bounds: 10,000 messages each way.
        router = receiver.run { FloorSocket(RawZMQ.socket(context, ZMQ_ROUTER, bind: endpoint, highWaterMark: 10_000)) }
        dealer = sender.run { FloorSocket(RawZMQ.socket(context, ZMQ_DEALER, connect: endpoint, highWaterMark: 10_000)) }
    }

    func measureRate() -> Double {
        let (dealer, router, messages) = (dealer, router, messages)
        let start = Clock.now()
        receiver.start {
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 256, alignment: 16)
            defer { buffer.deallocate() }
            for _ in 0..<messages {
                _ = router.receive(buffer, 256) // the sender's routing id
                _ = router.receive(buffer, 256)
            }
        }
        sender.run {
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 16)
            defer { buffer.deallocate() }
            buffer.initializeMemory(as: UInt8.self, repeating: 7, count: 64)
            for _ in 0..<messages { dealer.send(buffer, 64) }
        }
        receiver.wait()
        return Double(messages) / Clock.seconds(since: start)
    }

    func finish() {
        let (dealer, router) = (dealer, router)
        sender.run { dealer.close() }
        receiver.run { router.close() }
        sender.finish()
        receiver.finish()
        RawZMQ.terminate(context)
    }
}
