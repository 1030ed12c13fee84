// instruction-counter: the scenarios whose instructions per message `.ci/check-instructions`
// counts under callgrind and holds to the budgets in
// Benchmarks/Thresholds/<system>/instructions.json (docs/benchmarks.md, "Instruction budgets"). It measures nothing itself: it runs each
// scenario's warm-up and then `--messages N` messages (or round trips, requests, performs),
// and the checker runs it twice, with two values of N, so that the difference of the two
// counts divided by the difference of the Ns is the steady state's cost per message, with
// every set-up and tear-down cancelled out.
//
//   swift build -c release && .ci/check-instructions
//   .build/release/instruction-counter --messages N [--only SCENARIO]
//
// Each thread whose instructions are budgeted calls its `markThread…` function once while
// it is set up, so that its callgrind file (`--separate-threads=yes`) names its role. Every
// message is built once and sent again, so that only the library's own work is counted.
import Dispatch
import Glibc
import RunLoopKit

// MARK: - The roles: one function per budgeted thread, called once on it

/// The role the calling thread marked last: each marker stores its own, so that no two are
/// folded into one function.
nonisolated(unsafe) var markedRole = 0

@inline(never) func markThreadStreamSender() { markedRole = 1 }
@inline(never) func markThreadStreamReceiverOwned() { markedRole = 2 }
@inline(never) func markThreadStreamReceiverBorrowing() { markedRole = 3 }
@inline(never) func markThreadPingPongDriver() { markedRole = 4 }
@inline(never) func markThreadPingPongEcho() { markedRole = 5 }
@inline(never) func markThreadRequester() { markedRole = 6 }
@inline(never) func markThreadRequestServer() { markedRole = 7 }
@inline(never) func markThreadPerformer() { markedRole = 8 }
@inline(never) func markThreadPerformTarget() { markedRole = 9 }
@inline(never) func markThreadExecutorLoop() { markedRole = 10 }
@inline(never) func markThreadHoppingTask() { markedRole = 11 }

/// Messages sent before the measured ones in every scenario: connections made, caches and
/// libzmq's pipes filled, the frame pool grown to what the stream keeps in flight.
let warmUp = 2_000

/// A count the receiving thread reaches, and the waiter it wakes when it does. Touched on
/// the receiving thread only, but by `expect` while no round runs (the semaphore orders it).
final class Countdown: @unchecked Sendable {
    private var remaining = 0
    private let done = DispatchSemaphore(value: 0)

    func expect(_ count: Int) { remaining = count }

    /// One more: the last wakes `wait()`.
    func tick() {
        remaining -= 1
        if remaining == 0 { done.signal() }
    }

    func wait() { done.wait() }
}

/// Runs `body` on a new plain thread (no run loop unless it makes one) and waits for it.
func onPlainThread(_ body: @escaping @Sendable () -> Void) {
    final class Box: @unchecked Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    var thread = pthread_t()
    precondition(pthread_create(&thread, nil, { pointer in
        Unmanaged<Box>.fromOpaque(pointer!).takeRetainedValue().body()
        return nil
    }, Unmanaged.passRetained(Box(body)).toOpaque()) == 0)
    pthread_join(thread, nil)
}

/// A 64-byte message, the bench's.
func makeMessage() -> LoopMessage {
    LoopMessage(id: 1, components: [.data([UInt8](repeating: 7, count: 64))])
}

// MARK: - The scenarios

/// The messages a stream's sender sends before it waits for the receiver to have them all.
/// Callgrind runs one thread at a time, so a free-running sender would run ahead by as many
/// messages as its time slices allow, and how often its frame pool ran dry (a buffer
/// allocated instead of reused) would vary from run to run. In bursts, every buffer comes
/// back before the next burst, and the receiver wakes once per burst.
let streamBurst = 100

/// One-way messages from a plain thread to a port on a loop thread (`port-throughput-threads`),
/// in bursts of `streamBurst`: the sender's `RemotePort.send` and the receiving loop's
/// delivery, owned or borrowed.
func stream(messages: Int, borrowing: Bool) throws {
    let countdown = Countdown()
    let worker = try WorkerThread(name: "receiver")
    let remote = try worker.performAndWait { () throws -> RemotePort in
        if borrowing { markThreadStreamReceiverBorrowing() } else { markThreadStreamReceiverOwned() }
        let port = try LocalPort()
        if borrowing {
            port.handler = .borrowing { _ in
                countdown.tick()
                return nil
            }
        } else {
            port.handler = .returning { _ in
                countdown.tick()
                return nil
            }
        }
        ThreadRunLoop.current.add(port, to: .default)
        return port.remote
    }
    onPlainThread {
        if !borrowing { markThreadStreamSender() }
        let message = makeMessage()
        for count in [warmUp, messages] {
            for burst in stride(from: 0, to: count, by: streamBurst) {
                let size = min(streamBurst, count - burst)
                countdown.expect(size)
                for _ in 0..<size { try! remote.send(message, timeout: .seconds(10)) }
                countdown.wait()
            }
        }
    }
    worker.stop()
}

/// Round trips of a message between two loop threads' ports (`port-pingpong-threads`): the
/// driver's handler sends the next ping, the echo's handler sends each message back.
func pingPong(roundTrips: Int) throws {
    final class Driver: @unchecked Sendable { // touched on the driver's thread only
        var target: RemotePort?
        var remaining = 0
        let message = makeMessage()
    }
    let driver = Driver()
    let countdown = Countdown()
    let driverThread = try WorkerThread(name: "driver")
    let echoThread = try WorkerThread(name: "echo")
    let driverRemote = try driverThread.performAndWait { () throws -> RemotePort in
        markThreadPingPongDriver()
        let port = try LocalPort { _ in
            driver.remaining -= 1
            if driver.remaining > 0 {
                try! driver.target!.send(driver.message, timeout: .seconds(10))
            } else {
                countdown.tick()
            }
            return nil
        }
        ThreadRunLoop.current.add(port, to: .default)
        return port.remote
    }
    let echoRemote = try echoThread.performAndWait { () throws -> RemotePort in
        markThreadPingPongEcho()
        let port = try LocalPort { message in
            try! driverRemote.send(message, timeout: .seconds(10))
            return nil
        }
        ThreadRunLoop.current.add(port, to: .default)
        return port.remote
    }
    for count in [warmUp, roundTrips] {
        countdown.expect(1)
        try driverThread.perform {
            driver.target = echoRemote
            driver.remaining = count
            try! echoRemote.send(driver.message, timeout: .seconds(10))
        }
        countdown.wait()
    }
    driverThread.stop()
    echoThread.stop()
}

/// `sendRequest` from a plain thread to a port on a loop thread whose handler returns the
/// request as the reply (`request-reply`).
func requestReply(requests: Int) throws {
    let worker = try WorkerThread(name: "server")
    let remote = try worker.performAndWait { () throws -> RemotePort in
        markThreadRequestServer()
        let port = try LocalPort { request in request }
        ThreadRunLoop.current.add(port, to: .default)
        return port.remote
    }
    onPlainThread {
        markThreadRequester()
        let request = makeMessage()
        for count in [warmUp, requests] {
            for _ in 0..<count {
                let reply = try! remote.sendRequest(request, sendTimeout: .seconds(10), receiveTimeout: .seconds(10))
                precondition(reply.id == 1)
            }
        }
    }
    worker.stop()
}

/// `performAndWait` from a plain thread on a worker's loop, returning the closure's answer
/// (`perform-roundtrip`), with one shape for every round trip: the caller wakes the sleeping
/// loop, which runs the closure, answers before the caller waits and sleeps again, and the
/// caller frees the request. Back to back, a round trip took that shape or another, by which
/// thread the kernel (and valgrind's lock) ran first after a futex wake: the loop still
/// awake, the caller blocked on the answer, the loop freeing the request (about 330
/// instructions more: a slow semaphore wait and signal, frees across threads), in
/// proportions that moved from run to run (31 to 55 % of the performs in the first shape),
/// so that rounds spread by 8 % and the median of five by 5 %. Two things fix the shape:
/// - before each perform the caller yields its CPU until the loop `isWaiting` (almost
///   always it already is: one load);
/// - the caller runs at nice 19, so that the loop it wakes preempts it at once (on one CPU,
///   as the checker runs it): on a loaded machine, the caller could otherwise reach its wait
///   first, on up to 2,500 of a run's 3,500 performs.
func perform(performs: Int) throws {
    let worker = try WorkerThread(name: "target")
    try worker.performAndWait { markThreadPerformTarget() }
    onPlainThread {
        markThreadPerformer()
        precondition(setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19) == 0) // this thread
        for count in [warmUp, performs] {
            for index in 0..<count {
                while !worker.loop.isWaiting { sched_yield() }
                let answer = try! worker.performAndWait { index &* 2 }
                precondition(answer == index &* 2)
            }
        }
    }
    worker.stop()
}

/// An actor pinned to a worker's loop (its executor is the loop's `LoopExecutor`).
actor PinnedCounter {
    let worker: WorkerThread
    private var calls = 0 // changed on every call, so that the hop cannot be optimized away
    nonisolated var unownedExecutor: UnownedSerialExecutor { worker.executor.asUnownedSerialExecutor() }
    init(worker: WorkerThread) { self.worker = worker }
    func echo(_ value: Int) -> Int {
        calls += 1
        return value
    }
}

/// A task on the cooperative pool awaiting a method of an actor pinned to a worker's loop
/// (`task-hop`): each call hops onto the loop's thread and back. The task marks whichever
/// pool thread resumes it, after every hop, so that all its threads are counted.
func taskHop(hops: Int) throws {
    let worker = try WorkerThread(name: "actor")
    try worker.performAndWait { markThreadExecutorLoop() }
    let counter = PinnedCounter(worker: worker)
    let done = DispatchSemaphore(value: 0)
    Task {
        for count in [warmUp, hops] {
            for index in 0..<count {
                let answer = await counter.echo(index)
                markThreadHoppingTask()
                precondition(answer == index)
            }
        }
        done.signal()
    }
    done.wait()
    worker.stop()
}

let scenarios: [(name: String, run: (Int) throws -> Void)] = [
    ("stream", { try stream(messages: $0, borrowing: false) }),
    ("stream-borrowing", { try stream(messages: $0, borrowing: true) }),
    ("ping-pong", { try pingPong(roundTrips: $0) }),
    ("request-reply", { try requestReply(requests: $0) }),
    ("perform", { try perform(performs: $0) }),
    ("task-hop", { try taskHop(hops: $0) }),
]

let arguments = Array(CommandLine.arguments.dropFirst())
guard let index = arguments.firstIndex(of: "--messages"), index + 1 < arguments.count,
      let messages = Int(arguments[index + 1]), messages > 0 else {
    print("usage: instruction-counter --messages N [--only SCENARIO]; scenarios: "
          + scenarios.map(\.name).joined(separator: ", "))
    exit(2)
}
let only = arguments.firstIndex(of: "--only").map { arguments[$0 + 1] }
for scenario in scenarios where only == nil || scenario.name == only {
    try scenario.run(messages)
}
