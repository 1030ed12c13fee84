// Swift concurrency on a run loop: an actor pinned to a worker thread's loop. Its methods,
// a timer of that loop and the messages of two ports on it all run on the worker's
// thread, driven from async code on the main task: the main task awaits the actor, a
// request/reply, a closure on the worker, and reads the port's messages through a stream
// on the actor. Prints what ran on which thread and exits 1 if anything ran elsewhere.
//
//     swift run actor-worker [--messages N] [--ticks N]
import Foundation
import RunLoopKit

/// What ran where, from any thread.
final class Ledger: @unchecked Sendable {
    struct Entry {
        let what: String
        let thread: String
        let expected: Bool
    }

    private let lock = NSLock()
    private var entries: [Entry] = [] // protected by lock

    /// Records `what` on the calling thread, and whether that is the thread it should run on.
    func record(_ what: String, expected: Bool) {
        let entry = Entry(what: what, thread: Ledger.threadName(), expected: expected)
        lock.lock()
        entries.append(entry)
        lock.unlock()
    }

    var all: [Entry] {
        lock.lock()
        defer { lock.unlock() }
        return entries
    }

    static func threadName() -> String {
        ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?")
            .trimmingCharacters(in: .newlines)
    }
}

/// A station pinned to the worker: its state is touched on the worker's thread only, by its
/// methods (jobs of the worker's executor) and by the loop's own callbacks (`assumeIsolated`).
actor Station {
    let worker: WorkerThread
    let ledger: Ledger
    private var ticks = 0
    private var received: [Int32] = []
    private var inbox: LocalPort?
    private var timer: LoopTimer?
    private var service: LocalPort?
    private var consumer: Task<Void, Never>?
    private var goal: (ticks: Int, messages: Int, done: CheckedContinuation<Void, Never>)?

    init(worker: WorkerThread, ledger: Ledger) {
        self.worker = worker
        self.ledger = ledger
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor { worker.executor.asUnownedSerialExecutor() }

    /// On the worker's thread, so it may use the loop-thread API: adds a timer and two ports
    /// to the worker's loop. Returns where to send messages and where to ask for the status.
    func open() throws -> (inbox: RemotePort, service: RemotePort) {
        ledger.record("station.open", expected: worker.isCurrent)
        let loop = ThreadRunLoop.current
        let timer = LoopTimer(after: .milliseconds(10), repeating: .milliseconds(10)) { [unowned self] _ in
            // A timer callback is no job of the executor, but it is on the loop's thread.
            assumeIsolated { $0.tick() }
        }
        loop.add(timer, to: .default)
        let service = try LocalPort { [unowned self] _ in
            assumeIsolated { $0.status() }
        }
        loop.add(service, to: .default)
        let inbox = try LocalPort()
        loop.add(inbox, to: .default)
        // The inbox's messages as a stream, consumed by a task on this actor: at most 16
        // wait in the stream; beyond, the port leaves the loop's modes until it catches up.
        let messages = inbox.messages(bufferingPolicy: .bounded(16))
        consumer = Task {
            for await message in messages { received(message) }
            ledger.record("stream ended", expected: worker.isCurrent)
        }
        (self.timer, self.service, self.inbox) = (timer, service, inbox)
        return (inbox.remote, service.remote)
    }

    private func tick() {
        ticks += 1
        ledger.record("timer tick", expected: worker.isCurrent)
        checkGoal()
    }

    private func received(_ message: LoopMessage) {
        received.append(message.id)
        ledger.record("port message", expected: worker.isCurrent)
        checkGoal()
    }

    private func status() -> LoopMessage {
        ledger.record("request handled", expected: worker.isCurrent)
        return LoopMessage(id: 0, text: "\(ticks) ticks, \(received.count) messages")
    }

    /// Suspends until the timer ticked `ticks` times and `messages` messages came.
    func waitFor(ticks: Int, messages: Int) async {
        ledger.record("station.waitFor", expected: worker.isCurrent)
        await withCheckedContinuation { done in
            goal = (ticks, messages, done)
            checkGoal()
        }
    }

    private func checkGoal() {
        guard let goal, ticks >= goal.ticks, received.count >= goal.messages else { return }
        self.goal = nil
        timer?.invalidate()
        goal.done.resume()
    }

    /// Closes the inbox (its stream ends) and waits for the consumer to finish.
    func close() async -> [Int32] {
        inbox?.invalidate()
        service?.invalidate()
        await consumer?.value
        ledger.record("station.close", expected: worker.isCurrent)
        return received
    }
}

// MARK: - The main task

func option(_ name: String, default value: Int) -> Int {
    guard let index = CommandLine.arguments.firstIndex(of: name), index + 1 < CommandLine.arguments.count,
          let parsed = Int(CommandLine.arguments[index + 1]), parsed > 0 else { return value }
    return parsed
}

/// The main task's work, on the main actor: returns whether all went right.
@MainActor
func main() async throws -> Bool {
    let messageCount = option("--messages", default: 200)
    let tickCount = option("--ticks", default: 5)
    // The main task runs on the main actor, whose executor on Linux is the main dispatch
    // queue: not necessarily the main thread, and never the worker's thread.
    let ledger = Ledger()
    let worker = try WorkerThread(name: "station")
    ledger.record("main task starts", expected: !worker.isCurrent)
    let station = Station(worker: worker, ledger: ledger)
    let (inbox, service) = try await station.open()
    ledger.record("main task after awaiting the actor", expected: !worker.isCurrent)

    // A closure on the worker, awaited: no thread blocks while it runs.
    let loopMode = try await worker.submit { () -> String in
        ledger.record("worker.submit closure", expected: worker.isCurrent)
        return "\(ThreadRunLoop.current.currentMode?.rawValue ?? "none")"
    }
    print("worker.submit ran in the worker's '\(loopMode)' mode")

    // Nonisolated async code preferring the worker's task executor runs there too.
    await Task(executorPreference: worker.executor.taskExecutor) {
        ledger.record("task on the worker's task executor", expected: worker.isCurrent)
    }.value

    // Port messages, sent from a plain thread while the main task awaits the actor.
    let sender = Thread {
        for id in 1...Int32(messageCount) {
            do { try inbox.send(LoopMessage(id: id), timeout: .seconds(10)) } catch { print("send \(id) failed: \(error)") }
        }
    }
    sender.start()
    await station.waitFor(ticks: tickCount, messages: messageCount)
    ledger.record("main task after the goal", expected: !worker.isCurrent)

    // Request/reply from async code: the reply comes through the process's requester thread.
    let reply = try await service.request(LoopMessage(id: 1, text: "status?"), receiveTimeout: .seconds(10))
    print("status reply: \(reply.text ?? "-")")

    let received = await station.close()
    worker.stop()


    // Summary.

    var byPlace: [String: (count: Int, wrong: Int)] = [:]
    var order: [String] = []
    for entry in ledger.all {
        let key = "\(entry.what) @ \(entry.thread)"
        if byPlace[key] == nil { order.append(key) }
        byPlace[key, default: (0, 0)].count += 1
        if !entry.expected { byPlace[key, default: (0, 0)].wrong += 1 }
    }
    print("\nwhat ran on which thread (the worker's is 'station'; the main task's may vary)")
    for key in order {
        let (count, wrong) = byPlace[key]!
        print("  \(String(count).padding(toLength: 5, withPad: " ", startingAt: 0)) \(key)\(wrong > 0 ? "   <-- \(wrong) on the wrong thread" : "")")
    }
    let wrong = byPlace.values.reduce(0) { $0 + $1.wrong }
    let inOrder = received == Array(1...Int32(messageCount))
    print("\nmessages: \(received.count) of \(messageCount), in order: \(inOrder); on the wrong thread: \(wrong)")
    return wrong == 0 && inOrder
}

exit(try await main() ? 0 : 1)
