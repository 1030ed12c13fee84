import CLinuxPoll
import CZeroMQ
import Dispatch
import Glibc
import LatencyStatistics

// The `floor` peers of the port cases (issue 15): RunLoopKit's own poll-set design written
// directly on libzmq and epoll, with no run-loop machinery. Each receiving thread sleeps in
// `epoll_wait` on its socket's `ZMQ_FD` (registered level-triggered for `EPOLLIN`, as the
// loop registers a port's). A thread serving a ROUTER drains it after each wake-up as the
// loop drains a port: with `ZMQ_DONTWAIT` until a receive finds nothing (which processes
// the socket's commands, as `ZMQ_EVENTS` does); a thread waiting for one message asks
// `ZMQ_EVENTS`. `ZMQ_FD` is edge-triggered: a send or receive may consume its edge, so one
// of the two comes before every sleep. The sockets are RunLoopKit's:
// a ROUTER per receiving port, a DEALER per sending thread and destination, with the same
// high-water marks; the threads are placed as RunLoopKit's are (see `Placement`).

/// One thread's poll set on one ZeroMQ socket's `ZMQ_FD`. Used by that thread only.
struct FloorPollSet {
    let socket: ZMQHandle
    private let epollFD: Int32

    init(watching socket: ZMQHandle) {
        self.socket = socket
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { fatalError("epoll_create1: errno \(errno)") }
        var descriptor: Int32 = -1
        var size = MemoryLayout<Int32>.size
        guard zmq_getsockopt(socket.raw, ZMQ_FD, &descriptor, &size) == 0 else { fatalError("ZMQ_FD: \(RawZMQ.errorText)") }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = 1
        guard epoll_ctl(epollFD, EPOLL_CTL_ADD, descriptor, &event) == 0 else { fatalError("epoll_ctl: errno \(errno)") }
    }

    /// Whether `ZMQ_EVENTS` has `event` (`ZMQ_POLLIN`, `ZMQ_POLLOUT`); asking re-arms the edge.
    @inline(__always)
    func has(_ event: Int32) -> Bool {
        var events: Int32 = 0
        var size = MemoryLayout<Int32>.size
        while zmq_getsockopt(socket.raw, ZMQ_EVENTS, &events, &size) != 0 {
            guard zmq_errno() == EINTR else { fatalError("ZMQ_EVENTS: \(RawZMQ.errorText)") }
        }
        return events & event != 0
    }

    /// Sleeps in `epoll_wait` until `ZMQ_FD` signals (retried on EINTR).
    @inline(__always)
    func sleep() {
        var event = epoll_event()
        while epoll_wait(epollFD, &event, 1, -1) < 0 {
            guard errno == EINTR else { fatalError("epoll_wait: errno \(errno)") }
        }
    }

    /// Returns once `ZMQ_EVENTS` has `event`, sleeping between the asks.
    @inline(__always)
    func wait(for event: Int32) {
        while !has(event) { sleep() }
    }

    func close() { Glibc.close(epollFD) }
}

extension RawZMQ {
    /// RunLoopKit's queue bounds: a port's `ZMQ_RCVHWM` and a sender's `ZMQ_SNDHWM`.
    static let floorHighWaterMark: Int32 = 10_000

    /// A ROUTER bound to `endpoint`, as a port's socket.
    static func floorRouter(_ context: ZMQHandle, bind endpoint: String) -> ZMQHandle {
        let socket = RawZMQ.socket(context, ZMQ_ROUTER)
        var mark = floorHighWaterMark
        zmq_setsockopt(socket.raw, ZMQ_RCVHWM, &mark, MemoryLayout<Int32>.size)
        if zmq_bind(socket.raw, endpoint) != 0 { fatalError("zmq_bind \(endpoint): \(errorText)") }
        return socket
    }

    /// A DEALER connected to `endpoint`, as a sending thread's connection.
    static func floorDealer(_ context: ZMQHandle, connect endpoint: String) -> ZMQHandle {
        let socket = RawZMQ.socket(context, ZMQ_DEALER)
        var mark = floorHighWaterMark
        zmq_setsockopt(socket.raw, ZMQ_SNDHWM, &mark, MemoryLayout<Int32>.size)
        if zmq_connect(socket.raw, endpoint) != 0 { fatalError("zmq_connect \(endpoint): \(errorText)") }
        return socket
    }

    /// `zmq_send` with `ZMQ_DONTWAIT` (and `more` for a frame that others follow); false
    /// when the queue is full (EAGAIN).
    @inline(__always)
    static func sendNow(_ socket: ZMQHandle, _ buffer: UnsafeRawPointer, _ count: Int, more: Bool = false) -> Bool {
        let flags = ZMQ_DONTWAIT | (more ? ZMQ_SNDMORE : 0)
        while zmq_send(socket.raw, buffer, count, flags) < 0 {
            switch zmq_errno() {
            case EINTR: continue
            case EAGAIN: return false
            default: fatalError("zmq_send: \(errorText)")
            }
        }
        return true
    }

    /// A send that `ZMQ_EVENTS` said may go: failing is a bug of the floor.
    @inline(__always)
    static func sendReady(_ socket: ZMQHandle, _ buffer: UnsafeRawPointer, _ count: Int, more: Bool = false) {
        guard sendNow(socket, buffer, count, more: more) else { fatalError("zmq_send: queue full") }
    }

    /// `zmq_recv` with `ZMQ_DONTWAIT`; nil when nothing waits (EAGAIN, after libzmq
    /// processed the socket's commands).
    @inline(__always)
    static func receiveNow(_ socket: ZMQHandle, _ buffer: UnsafeMutableRawPointer, _ capacity: Int) -> Int? {
        while true {
            let size = zmq_recv(socket.raw, buffer, capacity, ZMQ_DONTWAIT)
            if size >= 0 { return Int(size) }
            switch zmq_errno() {
            case EINTR: continue
            case EAGAIN: return nil
            default: fatalError("zmq_recv: \(errorText)")
            }
        }
    }

    /// `zmq_recv` with `ZMQ_DONTWAIT` of a frame that `ZMQ_EVENTS` said is there (or that
    /// follows one); returns its size.
    @inline(__always)
    static func receiveReady(_ socket: ZMQHandle, _ buffer: UnsafeMutableRawPointer, _ capacity: Int) -> Int {
        guard let size = receiveNow(socket, buffer, capacity) else { fatalError("zmq_recv: nothing waits") }
        return size
    }
}

/// A thread serving a ROUTER the floor's way until a message with an empty body: sleeps in
/// epoll, and after each wake-up receives `[routing id][body]` until a receive finds
/// nothing, handing each to its service's `handle`. With `frames` > 1 a message is
/// `[routing id]` and that many frames (wire format 2's header, reply address and data),
/// each received into the same buffer: the body handed over is the last frame.
final class FloorServerThread: Sendable {
    /// What the thread does with each message, and at the end (on the thread).
    struct Service {
        /// The ROUTER, the routing id and its size, the body (the last frame) and its size.
        let handle: (ZMQHandle, UnsafeMutableRawPointer, Int, UnsafeMutableRawPointer, Int) -> Void
        var finish: () -> Void = {}
    }

    private let thread: JoinableThread

    /// Binds the ROUTER on the new thread; `setUp` runs there next (connecting the
    /// thread's DEALERs) and returns the service. Returns once both are done.
    init(context: ZMQHandle, endpoint: String, cpu: Int?, frames: Int = 1, setUp: @escaping @Sendable () -> Service) {
        let ready = DispatchSemaphore(value: 0)
        thread = JoinableThread.start(cpu: cpu) {
            let router = RawZMQ.floorRouter(context, bind: endpoint)
            let service = setUp()
            ready.signal()
            FloorServerThread.serve(router, frames: frames, service.handle)
            service.finish()
            RawZMQ.close(router)
        }
        ready.wait()
    }

    private static func serve(_ router: ZMQHandle, frames: Int,
                              _ handle: (ZMQHandle, UnsafeMutableRawPointer, Int, UnsafeMutableRawPointer, Int) -> Void) {
        let pollSet = FloorPollSet(watching: router)
        defer { pollSet.close() }
        let identity = UnsafeMutableRawPointer.allocate(byteCount: 256, alignment: 16)
        let body = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 16)
        defer { identity.deallocate(); body.deallocate() }
        while true {
            // Drained as a port is: until a receive finds nothing, which processes the
            // socket's commands as `ZMQ_EVENTS` would, so the descriptor is re-armed.
            while let identitySize = RawZMQ.receiveNow(router, identity, 256) {
                var bodySize = RawZMQ.receiveReady(router, body, 4096)
                for _ in 1..<frames { bodySize = RawZMQ.receiveReady(router, body, 4096) }
                if bodySize == 0 { return }
                handle(router, identity, identitySize, body, min(bodySize, 4096))
            }
            pollSet.sleep()
        }
    }

    /// Joins the thread; send it an empty body first.
    func join() { thread.join() }
}

/// `port-pingpong-threads`' floor: the ping-pong of `RunLoopKitPingPong` between a driver
/// and an echo thread, each with a ROUTER it sleeps on and a DEALER to the other's.
final class FloorPingPong: LatencyContender {
    let name = "floor"
    private let context = RawZMQ.context()
    private let driver = CommandThread()
    private let echo: FloorServerThread
    /// The driver's ROUTER (its poll set's socket) and DEALER; used on the driver thread only.
    private let sockets: Confined<(pollSet: FloorPollSet, dealer: ZMQHandle)>

    init() {
        let context = context
        let driverEndpoint = "inproc://runloopkit-bench.floor.pingpong.driver"
        let echoEndpoint = "inproc://runloopkit-bench.floor.pingpong.echo"
        let router = driver.run { RawZMQ.floorRouter(context, bind: driverEndpoint) }
        echo = FloorServerThread(context: context, endpoint: echoEndpoint, cpu: Placement.pair) {
            let back = RawZMQ.floorDealer(context, connect: driverEndpoint)
            return .init(handle: { _, _, _, body, size in RawZMQ.sendReady(back, body, size) },
                         finish: { RawZMQ.close(back) })
        }
        let dealer = driver.run { RawZMQ.floorDealer(context, connect: echoEndpoint) }
        sockets = Confined((FloorPollSet(watching: router), dealer))
    }

    func measure(_ count: Int) -> LatencyHistogram {
        let sockets = sockets
        return driver.run {
            let (pollSet, dealer) = sockets.value
            var recorder = LatencyHistogram()
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 16)
            defer { buffer.deallocate() }
            buffer.initializeMemory(as: UInt8.self, repeating: 7, count: 64)
            for _ in 0..<count {
                let start = Clock.now()
                RawZMQ.sendReady(dealer, buffer, 64)
                pollSet.wait(for: ZMQ_POLLIN)
                _ = RawZMQ.receiveReady(pollSet.socket, buffer, 256) // the echo's routing id
                precondition(RawZMQ.receiveReady(pollSet.socket, buffer, 4096) == 64)
                recorder.record(nanoseconds: Clock.now() &- start)
            }
            return recorder
        }
    }

    func finish() {
        let sockets = sockets
        driver.run {
            var empty: UInt8 = 0
            RawZMQ.sendReady(sockets.value.dealer, &empty, 0)
        }
        echo.join()
        driver.run {
            RawZMQ.close(sockets.value.dealer)
            RawZMQ.close(sockets.value.pollSet.socket)
            sockets.value.pollSet.close()
        }
        driver.finish()
        RawZMQ.terminate(context)
    }
}

/// `request-reply`'s floor: a DEALER on the driver thread sends a 64-byte request to a
/// ROUTER served by another thread, which sends it back to the requester's routing id;
/// the driver sleeps in epoll on its DEALER until the reply is there.
final class FloorRequestReply: LatencyContender {
    let name = "floor"
    private let context = RawZMQ.context()
    private let server: FloorServerThread
    private let requester: FloorRequester

    init() {
        let context = context
        let endpoint = "inproc://runloopkit-bench.floor.request-reply"
        server = FloorServerThread(context: context, endpoint: endpoint, cpu: Placement.pair) {
            .init(handle: { router, identity, identitySize, body, size in
                RawZMQ.sendReady(router, identity, identitySize, more: true)
                RawZMQ.sendReady(router, body, size)
            })
        }
        requester = FloorRequester(context, connect: endpoint)
    }

    func measure(_ count: Int) -> LatencyHistogram { requester.measure(count) }

    func finish() {
        requester.finish { server.join() }
        RawZMQ.terminate(context)
    }
}

/// The requester of `request-reply`'s and `request-reply-deferred`'s floors: a DEALER on
/// a driver thread sends a 64-byte request and sleeps in epoll on the DEALER until the
/// reply is there.
final class FloorRequester: Sendable {
    private let driver: CommandThread
    /// The DEALER in its poll set; used on the driver thread only.
    private let client: Confined<FloorPollSet>

    /// A requester connected to the ROUTER bound at `endpoint`.
    init(_ context: ZMQHandle, connect endpoint: String) {
        let driver = CommandThread()
        client = Confined(driver.run { FloorPollSet(watching: RawZMQ.floorDealer(context, connect: endpoint)) })
        self.driver = driver
    }

    func measure(_ count: Int) -> LatencyHistogram {
        let client = client
        return driver.run {
            let pollSet = client.value
            var recorder = LatencyHistogram()
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 16)
            defer { buffer.deallocate() }
            buffer.initializeMemory(as: UInt8.self, repeating: 7, count: 64)
            for _ in 0..<count {
                let start = Clock.now()
                RawZMQ.sendReady(pollSet.socket, buffer, 64)
                pollSet.wait(for: ZMQ_POLLIN)
                precondition(RawZMQ.receiveReady(pollSet.socket, buffer, 4096) == 64)
                recorder.record(nanoseconds: Clock.now() &- start)
            }
            return recorder
        }
    }

    /// Sends the empty request that ends the server, waits for it (`join`), and closes.
    func finish(joining join: () -> Void) {
        let client = client
        driver.run {
            var empty: UInt8 = 0
            RawZMQ.sendReady(client.value.socket, &empty, 0)
        }
        join()
        driver.run {
            RawZMQ.close(client.value.socket)
            client.value.close()
        }
        driver.finish()
    }
}

/// `port-throughput-threads`' floor: a sending thread's DEALER sends 64-byte messages with
/// `ZMQ_DONTWAIT`, sleeping in epoll on its `ZMQ_FD` until `ZMQ_EVENTS` says `ZMQ_POLLOUT`
/// whenever the queue is full; the receiving thread drains its ROUTER in epoll.
///
/// With `wireFormat2` (`floor-v2`), each message is RunLoopKit's three frames instead of
/// one (docs/wire-format.md): a 21-byte header (a message with one data component), an
/// empty reply address and the 64 bytes; the receiver takes the routing id and the three
/// frames, decoding nothing. RunLoopKit ÷ floor-v2 is then what its own code costs, and
/// floor-v2 ÷ floor what the framing costs in libzmq.
final class FloorThroughput: RateContender {
    let name: String
    private let wireFormat2: Bool
    private let context = RawZMQ.context()
    private let sender = CommandThread(cpu: Placement.sender)
    private let receiver: FloorServerThread
    /// The sender's DEALER in its poll set; used on the sending thread only.
    private let dealer: Confined<FloorPollSet>
    private let expected = SharedCounter()
    private let received = DispatchSemaphore(value: 0)
    private let messages: Int

    /// Wire format 2's header of a message with id 1 and one data component: "RLK",
    /// version 2, kind 0 (a message), flags 0, 1 component, id 1, correlation id 0, kind 0 (data).
    static let wireFormat2Header: [UInt8] = Array("RLK".utf8) + [2, 0, 0, 1, 0, 1, 0, 0, 0]
        + [UInt8](repeating: 0, count: 8) + [0]

    init(messages: Int, wireFormat2: Bool = false) {
        self.messages = messages
        self.wireFormat2 = wireFormat2
        name = wireFormat2 ? "floor-v2" : "floor"
        let (context, expected, received) = (context, expected, received)
        let endpoint = "inproc://runloopkit-bench.\(name).throughput"
        receiver = FloorServerThread(context: context, endpoint: endpoint, cpu: Placement.receiver,
                                     frames: wireFormat2 ? 3 : 1) {
            var count = 0
            return .init(handle: { _, _, _, _, _ in
                count += 1
                if count == expected.load() {
                    count = 0
                    received.signal()
                }
            })
        }
        dealer = Confined(sender.run { FloorPollSet(watching: RawZMQ.floorDealer(context, connect: endpoint)) })
    }

    func measureRate() -> Double {
        let (dealer, messages, wireFormat2) = (dealer, messages, wireFormat2)
        expected.store(messages)
        let start = Clock.now()
        sender.run {
            let pollSet = dealer.value
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 16)
            defer { buffer.deallocate() }
            buffer.initializeMemory(as: UInt8.self, repeating: 7, count: 64)
            if wireFormat2 {
                let header = UnsafeMutableRawPointer.allocate(byteCount: 21, alignment: 16)
                defer { header.deallocate() }
                FloorThroughput.wireFormat2Header.withUnsafeBytes { header.copyMemory(from: $0.baseAddress!, byteCount: 21) }
                for _ in 0..<messages {
                    // Once the first frame is queued, the message's other frames are too
                    // (libzmq counts a high-water mark in whole messages).
                    while !RawZMQ.sendNow(pollSet.socket, header, 21, more: true) { pollSet.wait(for: ZMQ_POLLOUT) }
                    RawZMQ.sendReady(pollSet.socket, header, 0, more: true)
                    RawZMQ.sendReady(pollSet.socket, buffer, 64)
                }
            } else {
                for _ in 0..<messages {
                    while !RawZMQ.sendNow(pollSet.socket, buffer, 64) { pollSet.wait(for: ZMQ_POLLOUT) }
                }
            }
        }
        received.wait()
        return Double(messages) / Clock.seconds(since: start)
    }

    func finish() {
        let (dealer, wireFormat2) = (dealer, wireFormat2)
        sender.run {
            // The end: a message whose last frame is empty.
            var empty: UInt8 = 0
            if wireFormat2 {
                while !RawZMQ.sendNow(dealer.value.socket, &empty, 0, more: true) { dealer.value.wait(for: ZMQ_POLLOUT) }
                RawZMQ.sendReady(dealer.value.socket, &empty, 0, more: true)
                RawZMQ.sendReady(dealer.value.socket, &empty, 0)
            } else {
                while !RawZMQ.sendNow(dealer.value.socket, &empty, 0) { dealer.value.wait(for: ZMQ_POLLOUT) }
            }
        }
        receiver.join()
        sender.run {
            RawZMQ.close(dealer.value.socket)
            dealer.value.close()
        }
        sender.finish()
        RawZMQ.terminate(context)
    }
}

/// `request-reply-deferred`'s floor: `FloorRequestReply`'s DEALER requester, and a server
/// thread that hands each request (`[routing id][body]`) to a worker thread over an inproc
/// PAIR instead of answering it; the worker sends both frames back over the PAIR, and the
/// server forwards them on its ROUTER. The server thread sleeps in one epoll set on both
/// sockets' `ZMQ_FD`s and drains both after each wake-up, until a pass over the two finds
/// nothing (a send on one may consume the other's edge, so the last call on each before
/// the sleep is a receive that found nothing); the worker sleeps in epoll on its PAIR.
/// The three threads are placed as RunLoopKit's are (see `Placement`).
final class FloorDeferredRequestReply: LatencyContender {
    let name = "floor"
    private let context = RawZMQ.context()
    private let server: JoinableThread
    private let worker: JoinableThread
    private let requester: FloorRequester

    init() {
        let context = context
        let endpoint = "inproc://runloopkit-bench.floor.request-reply-deferred"
        let handOff = "inproc://runloopkit-bench.floor.request-reply-deferred.worker"
        let bound = DispatchSemaphore(value: 0)
        server = JoinableThread.start(cpu: Placement.pair) {
            let router = RawZMQ.floorRouter(context, bind: endpoint)
            let pair = RawZMQ.socket(context, ZMQ_PAIR, bind: handOff)
            bound.signal()
            FloorDeferredRequestReply.serve(router, handingTo: pair)
            RawZMQ.close(pair)
            RawZMQ.close(router)
        }
        bound.wait()
        let connected = DispatchSemaphore(value: 0)
        worker = JoinableThread.start(cpu: Placement.pair) {
            let pair = RawZMQ.socket(context, ZMQ_PAIR, connect: handOff)
            connected.signal()
            FloorDeferredRequestReply.work(on: pair)
            RawZMQ.close(pair)
        }
        connected.wait()
        requester = FloorRequester(context, connect: endpoint)
    }

    /// The server thread: requests from the ROUTER go to the PAIR, replies from the PAIR
    /// go out on the ROUTER; ends after passing on a request with an empty body.
    private static func serve(_ router: ZMQHandle, handingTo pair: ZMQHandle) {
        let epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { fatalError("epoll_create1: errno \(errno)") }
        defer { close(epollFD) }
        for socket in [router, pair] {
            var descriptor: Int32 = -1
            var size = MemoryLayout<Int32>.size
            guard zmq_getsockopt(socket.raw, ZMQ_FD, &descriptor, &size) == 0 else { fatalError("ZMQ_FD: \(RawZMQ.errorText)") }
            var event = epoll_event()
            event.events = EPOLLIN.rawValue
            guard epoll_ctl(epollFD, EPOLL_CTL_ADD, descriptor, &event) == 0 else { fatalError("epoll_ctl: errno \(errno)") }
        }
        let identity = UnsafeMutableRawPointer.allocate(byteCount: 256, alignment: 16)
        let body = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 16)
        defer { identity.deallocate(); body.deallocate() }
        var ending = false
        while true {
            var moved = true
            while moved {
                moved = false
                while let identitySize = RawZMQ.receiveNow(router, identity, 256) {
                    let bodySize = RawZMQ.receiveReady(router, body, 4096)
                    moved = true
                    if bodySize == 0 { ending = true }
                    RawZMQ.sendReady(pair, identity, identitySize, more: true)
                    RawZMQ.sendReady(pair, body, min(bodySize, 4096))
                }
                if ending { return }
                while let identitySize = RawZMQ.receiveNow(pair, identity, 256) {
                    let bodySize = RawZMQ.receiveReady(pair, body, 4096)
                    moved = true
                    RawZMQ.sendReady(router, identity, identitySize, more: true)
                    RawZMQ.sendReady(router, body, min(bodySize, 4096))
                }
            }
            var event = epoll_event()
            while epoll_wait(epollFD, &event, 1, -1) < 0 {
                guard errno == EINTR else { fatalError("epoll_wait: errno \(errno)") }
            }
        }
    }

    /// The worker thread: sends each request's two frames back as its reply; ends at an
    /// empty body.
    private static func work(on pair: ZMQHandle) {
        let pollSet = FloorPollSet(watching: pair)
        defer { pollSet.close() }
        let identity = UnsafeMutableRawPointer.allocate(byteCount: 256, alignment: 16)
        let body = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 16)
        defer { identity.deallocate(); body.deallocate() }
        while true {
            while let identitySize = RawZMQ.receiveNow(pair, identity, 256) {
                let bodySize = RawZMQ.receiveReady(pair, body, 4096)
                if bodySize == 0 { return }
                RawZMQ.sendReady(pair, identity, identitySize, more: true)
                RawZMQ.sendReady(pair, body, min(bodySize, 4096))
            }
            pollSet.sleep()
        }
    }

    func measure(_ count: Int) -> LatencyHistogram { requester.measure(count) }

    func finish() {
        requester.finish {
            server.join()
            worker.join()
        }
        RawZMQ.terminate(context)
    }
}
