// A named-port server whose requests are answered from a WorkerPool's threads. Its port's
// handler is `.deferring`: it gets each request with its reply right, hands the right to
// the pool with `perform(moving:)` and returns at once, so the port's loop is free for the
// next request while a worker does the work; the worker replies, and the reply goes back
// through the port's loop. The same program is its own client: by default it serves and
// spawns one client process of itself (`--client NAME`), which sends N requests one after
// the other and prints the time per request (p50, p99); the server then prints how many
// each worker answered and exits 0. With `--serve` it serves until Ctrl-C instead.
import ArgumentParser
import Foundation
import Glibc
import RunLoopKit
import Synchronization

struct PoolServer: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pool-server", abstract: "A named-port server whose requests a worker pool answers.")

    @Option(help: "The server's port name (default: runloopkit.pool-server.<pid>).")
    var name: String?

    @Option(help: "How many worker threads answer.")
    var workers = 2

    @Option(help: "How many requests the client sends.")
    var requests = 1000

    @Flag(help: "Serve until Ctrl-C or SIGTERM, for clients started elsewhere (`pool-server --client NAME`).")
    var serve = false

    @Option(help: "Be a client of the server with this name: send the requests, print the time per request.")
    var client: String?

    func run() throws {
        if let serverName = client {
            try runClient(of: serverName)
        } else {
            try runServer()
        }
    }

    // MARK: - The server

    private func runServer() throws {
        let loop = ThreadRunLoop.current
        let pool = try WorkerPool(name: "answers", count: workers)
        let answered = Tally(workers)                  // requests answered, per worker
        let serverName = name ?? "runloopkit.pool-server.\(getpid())"

        let port = try LocalPort(name: serverName, handling: .deferring { request, right in
            guard let right else { return }              // a one-way message: nothing to answer
            try pool.perform(moving: right) { right in
                // On one of the pool's threads: the work, then the reply.
                let number = Int(request.text ?? "") ?? 0
                if let index = pool.workers.firstIndex(where: { $0.loop.isOwnerThread }) { answered.count(index) }
                right.reply(LoopMessage(id: 0, text: "\(number * number)"))
            }
        })
        loop.add(port, to: .default)
        say("server: serving '\(serverName)' from a pool of \(workers) workers")

        if serve {
            try MainLoop.run(stoppingOn: [.interrupt, .terminate])
        } else {
            let pid = try spawnClient(of: serverName)
            var exit: ChildExit?
            let child = try ChildProcessSource(pid: pid) { exit = $0 }
            loop.add(child, to: .default)
            let deadline = Deadline.after(.seconds(120))
            while exit == nil && Deadline.now() < deadline { loop.run(mode: .default, before: deadline) }
            guard exit == .exited(0) else {
                say("server: the client \(exit.map { "\($0)" } ?? "did not end")")
                if exit == nil { kill(pid, SIGKILL) }
                throw ExitCode.failure
            }
        }
        port.invalidate()
        pool.stop()                                   // runs what is queued, joins the workers
        let counts = answered.counts
        let perWorker = counts.enumerated().map { "answers-\($0.offset) \($0.element)" }.joined(separator: ", ")
        say("server: \(counts.reduce(0, +)) requests answered from the pool (\(perWorker))")
    }

    /// Spawns a client process of this program with `posix_spawn` (not Foundation's
    /// `Process`, which would reap it before its child source could).
    private func spawnClient(of serverName: String) throws -> pid_t {
        let path = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        let arguments = [path, "--client", serverName, "--requests", "\(requests)"]
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, nil, nil, argv, environ)
        guard rc == 0 else {
            say("server: cannot spawn the client: \(String(cString: strerror(rc)))")
            throw ExitCode.failure
        }
        return pid
    }

    // MARK: - The client

    private func runClient(of serverName: String) throws {
        let server = try RemotePort(named: serverName)
        let clock = ContinuousClock()
        var times: [Duration] = []
        times.reserveCapacity(requests)
        for number in 0..<requests {
            let start = clock.now
            let reply = try server.sendRequest(LoopMessage(id: 1, text: "\(number)"),
                                               sendTimeout: .seconds(5), receiveTimeout: .seconds(5))
            times.append(clock.now - start)
            guard reply.text == "\(number * number)" else {
                say("client: request \(number) answered '\(reply.text ?? "")'")
                throw ExitCode.failure
            }
        }
        guard !times.isEmpty else { return say("client: no request sent") }
        times.sort()
        func microseconds(_ quantile: Double) -> String {
            let time = times[min(times.count - 1, Int(Double(times.count) * quantile))]
            let (seconds, attoseconds) = time.components
            return String(format: "%.1f", Double(seconds) * 1e6 + Double(attoseconds) / 1e12)
        }
        say("client: \(requests) requests answered, per request p50 \(microseconds(0.5)) µs, p99 \(microseconds(0.99)) µs")
    }
}

/// Writes `line` to standard output at once (not buffered until exit, as `print` is into a
/// pipe), so that the server's and the client's lines come in the order they happened.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// How many requests each worker answered. Any thread.
final class Tally: Sendable {
    private let perWorker: Mutex<[Int]>
    init(_ workers: Int) { perWorker = Mutex([Int](repeating: 0, count: workers)) }
    func count(_ worker: Int) { perWorker.withLock { $0[worker] += 1 } }
    var counts: [Int] { perWorker.withLock { $0 } }
}

PoolServer.main()
