import Dispatch
import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import Synchronization
import XCTest

/// Load: 8 threads and 2 processes exchange messages and request/replies through many
/// ports while sender workers are stopped and started at random, short-lived requester
/// threads come and go, and requester processes are killed mid-request. Every accepted
/// message must arrive exactly once and in its sender's order, nothing may hang, and the
/// process ends with the descriptors it started with.
///
/// `RUNLOOPKIT_SOAK_SECONDS` sets the duration (default 20); `RUNLOOPKIT_SOAK_REPORT`
/// names a file to write the figures to.
final class SoakTests: XCTestCase {
    /// A stable thread with a sink port that checks each sender's sequence.
    final class Hub: @unchecked Sendable {
        struct Tally {
            var last: [Int32: Int] = [:] // sender → highest sequence number seen
            var skipped: [Int32: Set<Int>] = [:] // sender → numbers below it not seen yet
            var delivered = 0
            var outOfOrder = 0 // arrived after a higher number from the same sender
            var duplicates = 0 // a number seen before
            var expected: Int?
            var reached: DispatchSemaphore?
        }

        let worker: WorkerThread
        let port: RemotePort
        let tally = LockedValue(Tally())

        init(index: Int) throws {
            let tally = tally
            let published = LockedValue<RemotePort?>(nil)
            worker = try WorkerThread(name: "hub-\(index)") {
                let sink = try! LocalPort { message in
                    let sequence = message.data.first.map { $0.withUnsafeBytes { Int($0.loadUnaligned(as: UInt64.self)) } } ?? -1
                    tally.withLock { tally in
                        let last = tally.last[message.id, default: 0]
                        if sequence > last {
                            if sequence > last + 1 { tally.skipped[message.id, default: []].formUnion(last + 1..<sequence) }
                            tally.last[message.id] = sequence
                        } else if tally.skipped[message.id]?.remove(sequence) != nil {
                            tally.outOfOrder += 1
                        } else {
                            tally.duplicates += 1
                        }
                        tally.delivered += 1
                        if tally.delivered == tally.expected { tally.reached?.signal() }
                    }
                    return nil
                }
                ThreadRunLoop.current.add(sink, to: .default)
                published.withLock { $0 = sink.remote }
            }
            port = published.withLock { $0! }
        }

        /// Waits until `expected` messages in all have arrived (or the safety net passes).
        func waitForDelivery(of expected: Int, seconds: Double) -> Bool {
            let reached = DispatchSemaphore(value: 0)
            let already = tally.withLock { tally in
                tally.expected = expected
                tally.reached = reached
                return tally.delivered >= expected
            }
            return already || reached.wait(timeout: .now() + seconds) == .success
        }
    }

    /// A named port on a worker answering requests; one whose text is "about to die" comes
    /// from a requester process, which is killed before the answer goes back.
    final class Server: @unchecked Sendable {
        let name = "soak-server-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let worker: WorkerThread
        let victim = LockedValue<pid_t>(0)
        let answered = LockedValue(0)

        init() throws {
            let (name, victim, answered) = (name, victim, answered)
            worker = try WorkerThread(name: "soak-server") {
                let port = try! LocalPort(name: name) { request in
                    let pid = victim.withLock { $0 }
                    if request.text == "about to die" && pid > 0 { kill(pid, SIGKILL) }
                    answered.withLock { $0 += 1 }
                    return LoopMessage(id: request.id, text: "answer")
                }
                ThreadRunLoop.current.add(port, to: .default)
            }
        }
    }

    /// A worker sending numbered messages to random hubs and requests to the processes
    /// until told to stop.
    final class Sender: @unchecked Sendable {
        let id: Int32
        /// Released once stopped: a stopped worker's loop keeps its poll set's descriptors
        /// for as long as the `WorkerThread` is referenced.
        private var worker: WorkerThread?
        let stopping = Atomic<Bool>(false)
        let accepted = LockedValue<[Int: Int]>([:]) // hub → messages it took from us
        let requests = LockedValue((answered: 0, failed: 0))

        init(id: Int32, hubs: [Hub], peers: [RemotePort]) throws {
            self.id = id
            let worker = try WorkerThread(name: "sender-\(id)")
            self.worker = worker
            try worker.perform { [self] in
                var count = 0
                while !stopping.load(ordering: .relaxed) {
                    let hub = Int.random(in: 0..<hubs.count)
                    let sequence = accepted.withLock { $0[hub, default: 0] } + 1
                    let bytes = withUnsafeBytes(of: UInt64(sequence)) { Array($0) }
                    if (try? hubs[hub].port.send(LoopMessage(id: id, components: [.data(bytes)]), timeout: .seconds(5))) != nil {
                        accepted.withLock { $0[hub, default: 0] += 1 }
                    }
                    count += 1
                    if count % 200 == 0, let peer = peers.randomElement() {
                        let reply = try? peer.sendRequest(LoopMessage(id: 1, text: "job"), sendTimeout: .seconds(5),
                                                          receiveTimeout: .seconds(5))
                        requests.withLock { reply == nil ? ($0.failed += 1) : ($0.answered += 1) }
                    }
                }
            }
        }

        func stop() {
            stopping.store(true, ordering: .relaxed)
            worker?.stop()
            worker = nil
        }
    }

    /// Set in the child process the soak runs in.
    private static let childVariable = "RUNLOOPKIT_SOAK_CHILD"

    func testUnderLoadAndWorkerChurnEveryAcceptedMessageArrivesExactlyOnceInOrder() throws {
        guard childScenario(Self.childVariable) != nil else {
            // The soak runs in a process of its own (this test binary again, filtered to this
            // test), so that its descriptor count starts from its own: in the suite's process,
            // what earlier tests left was still closing when the count was taken (179 before
            // the churn, 140 after, in one run), which hid as many new ones.
            let run = try runCapturing(childTestArguments(self, test: #function), environment: [Self.childVariable: "1"])
            XCTAssertEqual(run.exitStatus, 0, "the soak's run:\n\(run.stdout)\n\(run.stderr)")
            for line in run.stdout.split(separator: "\n") where line.hasPrefix("soak:") { print(line) }
            return
        }
        let environment = ProcessInfo.processInfo.environment
        let seconds = environment["RUNLOOPKIT_SOAK_SECONDS"].flatMap(Int.init) ?? 20
        let peerBinary = try builtExecutable("multiprocess-checkin")
        let toolBinary = try builtExecutable("runloopkit")
        let loop = ThreadRunLoop.current
        let cpuBefore = processCPUTime()

        // Two peer processes, checked in by name over ipc.
        let mainName = "soak-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        var peers: [RemotePort] = []
        let checkins = try LocalPort(name: mainName) { message in
            if message.id == 100, let name = message.text, let peer = try? RemotePort(named: name) { peers.append(peer) }
            return nil
        }
        loop.add(checkins, to: .default)
        let processes = try (0..<2).map { index in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: peerBinary)
            process.arguments = ["--worker-of", mainName, "--index", "\(index)", "--lifetime", "\(seconds + 120)"]
            try process.run()
            return process
        }
        defer { for process in processes where process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let checkinLimit = Deadline.after(.seconds(30))
        while peers.count < 2 && Deadline.now() < checkinLimit { loop.run(mode: .default, before: checkinLimit) }
        XCTAssertEqual(peers.count, 2, "both peer processes checked in")

        // Four hubs and four senders: eight threads. Every 100 ms a random sender is replaced.
        let hubs = try (0..<4).map { try Hub(index: $0) }
        var nextID: Int32 = 0
        func newSender() throws -> Sender {
            nextID += 1
            return try Sender(id: nextID, hubs: hubs, peers: peers)
        }
        var senders: [Sender] = [] // started once the descriptors are counted
        var retired: [Sender] = []
        var churnError: Error?
        // Every 100 ms a short-lived requester thread asks the server once; every 2 s a
        // requester process is killed while its request is being answered.
        let server = try Server()
        let shortLived = LockedValue((answered: 0, failed: 0))
        var requesterThreads: [TestThread] = []
        var killed = 0
        let victimMode = LoopMode("SoakTests.victim")
        var ticks = 0
        let churn = LoopTimer(after: .milliseconds(100), repeating: .milliseconds(100)) { _ in
            let slot = Int.random(in: 0..<senders.count)
            senders[slot].stop()
            retired.append(senders[slot])
            do { senders[slot] = try newSender() } catch { churnError = error }

            requesterThreads.removeAll { $0.join(); return true } // each had 100 ms, and 5 s at most
            requesterThreads.append(TestThread { [name = server.name] in
                let reply = try? RemotePort(named: name).sendRequest(LoopMessage(id: 4, text: "once"))
                shortLived.withLock { reply?.text == "answer" ? ($0.answered += 1) : ($0.failed += 1) }
            })
            ticks += 1
            if ticks % 20 == 0 {
                // Spawned with posix_spawn and watched by a ChildProcessSource, not Foundation's
                // Process: its manager thread and per-child socket pair are Foundation's
                // descriptors, not the churn's. The churn waits for the victim's end.
                let pid = spawnChild([toolBinary, "request", server.name, "--id", "5", "--data", "about to die"])
                guard pid > 0 else { return }
                server.victim.withLock { $0 = pid }
                var end: ChildExit?
                do {
                    loop.add(try ChildProcessSource(pid: pid) { end = $0 }, to: victimMode)
                    let limit = Deadline.after(.seconds(30))
                    while end == nil && Deadline.now() < limit { loop.run(mode: victimMode, before: limit) }
                } catch { churnError = error }
                server.victim.withLock { $0 = 0 }
                if case .signalled = end { killed += 1 }
            }
        }
        loop.add(churn, to: .default)
        // What lives for the whole soak exists now, and nothing else does yet (the senders
        // start below, so that none of their connections is counted half-made): the senders
        // and the churn must leave no descriptor behind.
        let descriptorsBefore = ProcessResources.measure().descriptors
        let inventoryBefore = descriptorInventory()
        senders = try (0..<4).map { _ in try newSender() }
        loop.run(until: .after(.seconds(Int64(seconds))))
        churn.invalidate()
        for sender in senders { sender.stop() }
        for thread in requesterThreads { thread.join() }
        XCTAssertNil(churnError)

        // Every message a hub accepted must arrive there, exactly once, in order.
        let everyone = retired + senders
        var acceptedPerHub = [Int](repeating: 0, count: hubs.count)
        for sender in everyone {
            for (hub, count) in sender.accepted.withLock({ $0 }) { acceptedPerHub[hub] += count }
        }
        for (index, hub) in hubs.enumerated() {
            XCTAssertTrue(hub.waitForDelivery(of: acceptedPerHub[index], seconds: 60), "hub \(index) got all it accepted")
        }

        // Counted once the hubs have read everything: a stopped sender's sockets are closed,
        // but libzmq keeps each one (its mailbox, an eventfd) until the port at the other end
        // has read what it queued there (what makes a sender that exits lose nothing), and
        // under this load the hubs are still reading when the senders stop. What may remain
        // after the hubs' last read is libzmq ending those pipes and reaping the sockets,
        // which the settle allows for.
        let descriptorsAfter = openDescriptors(settlingAtMost: descriptorsBefore)
        XCTAssertLessThanOrEqual(descriptorsAfter, descriptorsBefore,
                                 "the stopped workers, requester threads and killed requester processes left nothing behind "
                                 + "once the hubs had read all they accepted; new: "
                                 + describeNewDescriptors(before: inventoryBefore, after: descriptorInventory()))

        let tallies = hubs.map { $0.tally.withLock { $0 } }
        let delivered = tallies.reduce(0) { $0 + $1.delivered }
        let accepted = acceptedPerHub.reduce(0, +)
        let requests = everyone.reduce((answered: 0, failed: 0)) { total, sender in
            let mine = sender.requests.withLock { $0 }
            return (total.answered + mine.answered, total.failed + mine.failed)
        }
        XCTAssertEqual(delivered, accepted, "lost \(accepted - delivered)")
        let outOfOrder = tallies.reduce(0) { $0 + $1.outOfOrder }
        let duplicates = tallies.reduce(0) { $0 + $1.duplicates }
        let neverArrived = tallies.reduce(0) { $0 + $1.skipped.values.reduce(0) { $0 + $1.count } }
        XCTAssertEqual(outOfOrder, 0, "delivered after a later message from the same sender")
        XCTAssertEqual(duplicates, 0, "delivered twice")
        XCTAssertEqual(neverArrived, 0, "skipped in a sender's sequence and never delivered")
        XCTAssertEqual(requests.failed, 0, "every request to a live peer process was answered")
        XCTAssertGreaterThan(requests.answered, 0)

        let shortLivedRequests = shortLived.withLock { $0 }
        XCTAssertEqual(shortLivedRequests.failed, 0, "every short-lived requester thread got its answer")
        XCTAssertGreaterThan(killed, 0, "requester processes were killed mid-request")

        for hub in hubs { hub.worker.stop() }
        server.worker.stop()
        for peer in peers { try? peer.send(LoopMessage(id: 3), timeout: .seconds(1)) }
        for process in processes { process.waitUntilExit() }
        checkins.invalidate()
        let cpu = processCPUTime() - cpuBefore

        let report = """
            soak: \(seconds) s, 8 threads (4 hubs, 4 senders) and 2 processes; \(everyone.count) sender workers \
            started, \(retired.count) stopped at random mid-stream; \(accepted) messages accepted, \(delivered) delivered, \
            \(accepted - delivered) lost (\(neverArrived) of them skipped mid-sequence), \(duplicates) duplicated, \(outOfOrder) out of order; \(requests.answered) cross-process request/replies \
            answered, \(requests.failed) failed; \(shortLivedRequests.answered) short-lived requester threads answered, \
            \(shortLivedRequests.failed) failed; \(killed) requester processes killed mid-request; descriptors \
            \(descriptorsBefore) before the churn, \(descriptorsAfter) after; CPU \(cpu.components.seconds * 1000 + cpu.components.attoseconds / 1_000_000_000_000_000) ms
            """
        print(report)
        if let path = environment["RUNLOOPKIT_SOAK_REPORT"] { try report.write(toFile: path, atomically: true, encoding: .utf8) }
    }
}
