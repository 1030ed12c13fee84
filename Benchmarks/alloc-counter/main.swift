// alloc-counter: heap allocations per message on RunLoopKit's message path, counted by an
// interposed malloc (CMallocCounter) on the thread that makes them, as SwiftNIO's
// allocation-counter tests count theirs. Each scenario has a budget beside it, in whole
// allocations per message; with `--check` the program exits 1 if any round's count is over
// its budget times the round's messages, exactly: one allocation more in a round of 20,000
// messages fails a budget of 0. CI runs it on a release
// build (`.ci/run`); docs/benchmarks.md ("Allocations per message") lists the budgets.
//
//   swift run -c release alloc-counter [--check] [--messages N]
//
// The messages are built once and sent again and again, so that only the library's own
// allocations are counted, not the caller's. Each allocation is counted as libzmq's or
// ours by its caller: a message is one frame of wire format 3 (over 33 bytes), for which
// libzmq allocates once on the sending thread (its copy of the frame, or the control block
// of a frame lent from RunLoopKit's pooled buffers), freed by the receiving one.
import CMallocCounter
import Dispatch
import Glibc
import RunLoopKit

/// Allocations on one thread: the library's and the Swift runtime's (`ours`), and libzmq's
/// own, told apart by the allocation's caller (libzmq allocates each frame over 33 bytes
/// it copies, and the 40-byte control block of each frame it is lent).
struct Allocations {
    var ours: UInt64
    var libzmq: UInt64

    /// The calling thread's so far.
    static var now: Allocations {
        Allocations(ours: rlk_thread_allocations(), libzmq: rlk_thread_libzmq_allocations())
    }

    /// From `start` to `self`, over a round of `count` messages.
    func since(_ start: Allocations, per count: Int) -> PerMessage {
        PerMessage(ours: ours - start.ours, libzmq: libzmq - start.libzmq, messages: count)
    }
}

/// The allocations of one round of messages, on one thread: whole counts.
struct PerMessage {
    let ours: UInt64
    let libzmq: UInt64
    /// The round's messages.
    let messages: Int

    /// Whether `count` is within `budget` allocations per message over the round, exactly.
    func isWithin(_ count: UInt64, budget: Int) -> Bool {
        count <= UInt64(budget) * UInt64(messages)
    }

    /// Whether libzmq's `count` is within `budget` per message over the round, and the
    /// chunks its queues grow by (libzmq 4.3's `config.hpp`), which the library does not
    /// choose: a pipe between two sockets queues messages in chunks of 256
    /// (`message_pipe_granularity`) and keeps one spare, so a sending thread allocates at
    /// most one chunk per 256 messages it sends, when the receiver is more than a chunk
    /// behind; and a thread that wakes the other (`activate_read`, `activate_write`: at
    /// most one command per message) writes to its mailbox, whose commands come in chunks
    /// of 16 (`command_pipe_granularity`). Measured: 54 to 77 in a round of 20,000 sends,
    /// 1 in 5,000 requests, none in a round received.
    func isWithinLibzmqs(_ count: UInt64, budget: Int) -> Bool {
        let pipeChunks = budget > 0 ? (UInt64(messages) + 255) / 256 : 0
        let commandChunks = (UInt64(messages) + 15) / 16
        return count <= UInt64(budget) * UInt64(messages) + pipeChunks + commandChunks
    }
}

/// One figure: allocations over a round of messages on one thread, and the most allowed
/// per message.
struct Figure {
    let name: String
    let perMessage: PerMessage
    /// The most of ours, per message; nil: reported, not checked.
    let budget: Int?
    /// The most of libzmq's, per message: one per message sent (the wire format's one frame:
    /// its copy, or the control block of a pooled buffer), none per message received; and
    /// its pipes' chunks (`PerMessage.isWithinLibzmqs`).
    let libzmqBudget: Int

    init(name: String, perMessage: PerMessage, budget: Int?, libzmqBudget: Int) {
        self.name = name
        self.perMessage = perMessage
        self.budget = budget
        self.libzmqBudget = libzmqBudget
    }

    var isOverBudget: Bool {
        !(budget.map { perMessage.isWithin(perMessage.ours, budget: $0) } ?? true)
            || !perMessage.isWithinLibzmqs(perMessage.libzmq, budget: libzmqBudget)
    }
}

/// Allocations the calling thread makes while `body` runs, per `count`.
func allocations(per count: Int, _ body: () throws -> Void) rethrows -> PerMessage {
    let before = Allocations.now
    try body()
    return Allocations.now.since(before, per: count)
}

/// A port on a loop thread of its own that counts the allocations its thread makes while
/// delivering messages: from the first message of a round to the last.
final class CountingServer: @unchecked Sendable {
    let worker: WorkerThread
    private(set) var remote: RemotePort! // set once, in init
    private let done = DispatchSemaphore(value: 0)
    // Touched on the worker's thread only, but for `expect` and `receiverAllocations`,
    // which are called while no round runs (a semaphore orders them).
    private var expected = 0
    private var received = 0
    private var startCount = Allocations(ours: 0, libzmq: 0)
    private var endCount = Allocations(ours: 0, libzmq: 0)
    /// The last message, for a server that keeps each.
    private var kept: LoopMessage?

    /// - Parameters:
    ///   - reply: whether requests are answered with the request itself.
    ///   - borrowing: whether the port's handler is a borrowing one (`LoopMessageView`).
    ///   - keeping: whether the owned handler keeps each message (until the next), so that
    ///     its buffers cannot serve the next message.
    init(reply: Bool, borrowing: Bool = false, keeping: Bool = false) throws {
        worker = try WorkerThread(name: "alloc-server")
        let port = try worker.performAndWait { [unowned self] () throws -> RemotePort in
            let port = try LocalPort()
            if borrowing {
                port.handler = .borrowing { [unowned self] _ in
                    count()
                    return nil
                }
            } else {
                port.handler = .returning { [unowned self] message in
                    if keeping { kept = message }
                    count()
                    return reply ? message : nil
                }
            }
            ThreadRunLoop.current.add(port, to: .default)
            return port.remote
        }
        remote = port
    }

    /// One message delivered: the round's first starts the count, its last ends it.
    private func count() {
        if received == 0 { startCount = .now }
        received += 1
        if received == expected {
            endCount = .now
            done.signal()
        }
    }

    /// Gets ready for a round of `count` messages.
    func expect(_ count: Int) {
        expected = count
        received = 0
    }

    /// Waits for the round, then gives the receiving thread's allocations per message
    /// (the first message's delivery is outside the window: the count starts in its handler).
    func receiverAllocations() -> PerMessage {
        done.wait()
        return endCount.since(startCount, per: expected - 1)
    }

    /// Holds the server's loop (its thread waits) until the returned semaphore is signalled,
    /// so that what is sent meanwhile stays in flight.
    func hold() throws -> DispatchSemaphore {
        let gate = DispatchSemaphore(value: 0)
        try worker.perform { gate.wait() }
        return gate
    }

    func stop() { worker.stop() }
}

/// Runs `body` on a new plain thread (no run loop of its own unless it makes one), waits
/// for it, and returns what it returned.
func onPlainThread(_ body: @escaping @Sendable () -> PerMessage) -> PerMessage {
    let box = ThreadBody(body)
    var thread = pthread_t()
    precondition(pthread_create(&thread, nil, { pointer in
        let box = Unmanaged<ThreadBody>.fromOpaque(pointer!).takeRetainedValue()
        box.result = box.body()
        return nil
    }, Unmanaged.passRetained(box).toOpaque()) == 0)
    pthread_join(thread, nil)
    return box.result
}

/// A plain thread's body and its result, written by the thread and read after the join.
final class ThreadBody: @unchecked Sendable {
    let body: @Sendable () -> PerMessage
    var result = PerMessage(ours: 0, libzmq: 0, messages: 0)
    init(_ body: @escaping @Sendable () -> PerMessage) { self.body = body }
}

final class Results: @unchecked Sendable {
    var figures: [Figure] = [] // appended on one thread at a time (each scenario joins its thread)
}

/// On the sending thread: warms up, then `send(count)`, counted. The server's count of that
/// round is left for the caller to take (`receiverAllocations`).
///
/// The warm-up fills what a steady state reuses: connections, caches, libzmq's pipes, and
/// the socket's frame pool, which grows to the most frames in flight at once, up to a bound
/// per size class (16,384 frames of up to 256 bytes, 4,096 of up to 1 KiB). So the server
/// is held while `inFlight` messages are sent, more than either bound and fewer than the
/// high-water marks let wait (10,000 on each side): the pool is then at its bound, however
/// deep a later round's queue gets on a busy machine. One free-running round follows.
func warmedUp(_ server: CountingServer, _ count: Int, _ send: (Int) -> PerMessage) -> PerMessage {
    let inFlight = 17_000
    server.expect(inFlight)
    let gate = try! server.hold()
    _ = send(inFlight)
    gate.signal()
    _ = server.receiverAllocations()
    server.expect(count)
    _ = send(count)
    _ = server.receiverAllocations()
    server.expect(count)
    return send(count)
}

func oneWay(payload: Int, messages: Int, borrowing: Bool = false, keeping: Bool = false,
            budgets: (send: Int?, receive: Int?), into results: Results) throws {
    let server = try CountingServer(reply: false, borrowing: borrowing, keeping: keeping)
    let message = LoopMessage(id: 1, components: [.data([UInt8](repeating: 7, count: payload))])
    let remote: RemotePort = server.remote
    let sendAll = { @Sendable (count: Int) -> PerMessage in
        try! allocations(per: count) {
            for _ in 0..<count { try remote.send(message, timeout: .seconds(10)) }
        }
    }
    let send = onPlainThread { warmedUp(server, messages, sendAll) }
    let receive = server.receiverAllocations()
    if let sendBudget = budgets.send {
        results.figures.append(Figure(name: "send, \(payload) B, plain thread", perMessage: send, budget: sendBudget,
                                      libzmqBudget: 1))
    }
    let receiving = borrowing ? "borrowed receive" : keeping ? "owned receive, each kept" : "owned receive"
    results.figures.append(Figure(name: "\(receiving), \(payload) B", perMessage: receive, budget: budgets.receive,
                                  libzmqBudget: 0))
    server.stop()
}

/// Sends of bytes (`RemotePort.send(id:bytes:)`), from a plain thread and from a loop thread.
func bytesSends(payload: Int, messages: Int, budget: Int?, into results: Results) throws {
    let bytes = [UInt8](repeating: 7, count: payload)
    try sends(named: "send bytes, \(payload) B", messages: messages, budget: budget, into: results) { remote, count in
        try bytes.withUnsafeBytes { buffer in
            for _ in 0..<count { try remote.send(id: 1, bytes: buffer, timeout: .seconds(10)) }
        }
    }
}

/// Sends of bytes filled in place (`RemotePort.send(id:byteCount:timeout:filling:)`), from a
/// plain thread and from a loop thread: the same allocations as `send(id:bytes:)`.
func filledSends(payload: Int, messages: Int, budget: Int?, into results: Results) throws {
    try sends(named: "send filled, \(payload) B", messages: messages, budget: budget, into: results) { remote, count in
        for _ in 0..<count {
            try remote.send(id: 1, byteCount: payload, timeout: .seconds(10)) { $0.initializeMemory(as: UInt8.self, repeating: 7) }
        }
    }
}

/// `count` one-way sends made by `send`, from a plain thread and from a loop thread, to a
/// server that does not reply: the figures `"\(name), plain thread"` and `"…, loop thread"`.
func sends(named name: String, messages: Int, budget: Int?, into results: Results,
           _ send: @escaping @Sendable (RemotePort, Int) throws -> Void) throws {
    let server = try CountingServer(reply: false)
    let remote: RemotePort = server.remote
    let sendAll = { @Sendable (count: Int) -> PerMessage in
        try! allocations(per: count) { try send(remote, count) }
    }
    let plain = onPlainThread { warmedUp(server, messages, sendAll) }
    _ = server.receiverAllocations()
    let worker = try WorkerThread(name: "alloc-sender")
    let fromLoop = try worker.performAndWait { warmedUp(server, messages, sendAll) }
    _ = server.receiverAllocations()
    worker.stop()
    results.figures.append(Figure(name: "\(name), plain thread", perMessage: plain, budget: budget, libzmqBudget: 1))
    results.figures.append(Figure(name: "\(name), loop thread", perMessage: fromLoop, budget: budget, libzmqBudget: 1))
    server.stop()
}

func requestReply(payload: Int, requests: Int, budgets: (requester: Int?, server: Int?), into results: Results) throws {
    let server = try CountingServer(reply: true)
    let message = LoopMessage(id: 1, components: [.data([UInt8](repeating: 7, count: payload))])
    let remote: RemotePort = server.remote
    let requester = onPlainThread {
        let round = { (count: Int) -> PerMessage in
            try! allocations(per: count) {
                for _ in 0..<count { _ = try remote.sendRequest(message) }
            }
        }
        server.expect(100)
        _ = round(100)
        _ = server.receiverAllocations()
        server.expect(requests)
        return round(requests)
    }
    let serving = server.receiverAllocations()
    results.figures.append(Figure(name: "request/reply, \(payload) B: requester", perMessage: requester,
                                  budget: budgets.requester, libzmqBudget: 1))
    results.figures.append(Figure(name: "request/reply, \(payload) B: server", perMessage: serving,
                                  budget: budgets.server, libzmqBudget: 1))
    server.stop()
}

let arguments = CommandLine.arguments.dropFirst()
let check = arguments.contains("--check")
let messages = arguments.firstIndex(of: "--messages").flatMap { Int(arguments[$0 + 1]) } ?? 20_000

guard rlk_malloc_counting_available() != 0 else {
    print("alloc-counter: built with a sanitizer, whose allocator this cannot count; build it without one")
    exit(2)
}

// The counter must see allocations made here and inside libzmq, or every budget would
// pass with nothing counted.
guard rlk_malloc_counter_find_libzmq() != 0 else {
    print("alloc-counter: libzmq's code was not found in the process; its allocations could not be told apart")
    exit(2)
}
let probeStart = rlk_thread_allocations()
let probe = [UInt8](repeating: 1, count: 100 + CommandLine.arguments.count) // the Swift runtime's malloc
guard rlk_thread_allocations() > probeStart, probe.count > 100 else {
    print("alloc-counter: malloc is not interposed in this build; nothing would be counted")
    exit(2)
}

// The budgets: today's counts (docs/benchmarks.md lists them). A change that allocates more
// per message fails CI; one that allocates less lowers its budget here.
let results = Results()
try oneWay(payload: 16, messages: messages, budgets: (send: 0, receive: 0), into: results)
try oneWay(payload: 64, messages: messages, budgets: (send: 0, receive: 0), into: results)
try oneWay(payload: 1024, messages: messages, budgets: (send: 0, receive: 0), into: results)
try oneWay(payload: 64, messages: messages, keeping: true, budgets: (send: nil, receive: 2), into: results)
try oneWay(payload: 16, messages: messages, borrowing: true, budgets: (send: nil, receive: 0), into: results)
try oneWay(payload: 64, messages: messages, borrowing: true, budgets: (send: nil, receive: 0), into: results)
try bytesSends(payload: 16, messages: messages, budget: 0, into: results)
try bytesSends(payload: 64, messages: messages, budget: 0, into: results)
try filledSends(payload: 16, messages: messages, budget: 0, into: results)
try filledSends(payload: 64, messages: messages, budget: 0, into: results)
try requestReply(payload: 16, requests: messages / 4, budgets: (requester: 2, server: 0), into: results)

// libzmq allocates every frame over 33 bytes on the sending thread: seen here, or its
// allocations would go uncounted.
guard let libzmqFrame = results.figures.first(where: { $0.name == "send, 64 B, plain thread" }),
      libzmqFrame.perMessage.libzmq >= UInt64(libzmqFrame.perMessage.messages) else {
    print("alloc-counter: libzmq's allocations are not counted (its malloc is not this one)")
    exit(2)
}

/// `text` padded with spaces to `width` characters.
func padded(_ text: String, _ width: Int) -> String {
    text + String(repeating: " ", count: max(0, width - text.count))
}

/// `count` per message of a round of `messages`, with two decimals, right-aligned in six
/// characters.
func formatted(_ count: UInt64, per messages: Int) -> String {
    let hundredths = Int((Double(count) / Double(messages) * 100).rounded())
    let text = "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
    return String(repeating: " ", count: max(0, 6 - text.count)) + text
}

print("allocations per message (\(messages) messages, \(messages / 4) requests); ours are budgeted;")
print("a round's whole counts are checked: at most the budget times its messages")
print("  \(padded("", 40))   ours  budget  libzmq  budget  round: ours, libzmq's / messages")
for figure in results.figures {
    let budget = figure.budget.map { String($0) } ?? "-"
    let verdict = figure.isOverBudget ? "OVER BUDGET" : ""
    let name = padded(figure.name, 40)
    let counts = figure.perMessage
    let round = "\(counts.ours), \(counts.libzmq) / \(counts.messages)"
    print("  \(name) \(formatted(counts.ours, per: counts.messages))  \(padded(budget, 6))  \(formatted(counts.libzmq, per: counts.messages))  \(padded(String(figure.libzmqBudget), 6))  \(padded(round, 30)) \(verdict)")
}
if check, results.figures.contains(where: \.isOverBudget) {
    print("alloc-counter: over budget")
    exit(1)
}
