// A command-line tool whose main thread runs the main loop, with @MainActor state: every
// kind of source a Linux tool waits on, serviced on the main thread.
//
//  - a timer of the main loop ticks;
//  - a worker thread sends messages to a port of the main thread, writes bytes into a
//    pipe watched by a descriptor source, and reports through `await MainActor.run`;
//  - a signal source counts SIGUSR1s (the worker sends some);
//  - `MainLoop.run(stoppingOn: [.interrupt, .terminate])` ends the run on Ctrl-C or SIGTERM.
//
// With --self-interrupt the tool sends itself SIGINT once its work is done, so CI shows the
// clean stop: the run returns, the worker is stopped (its queued work runs first), and the
// tool exits 0 after checking that everything ran on the main thread.
//
//     swift run main-actor [--self-interrupt] [--messages N]
import ArgumentParser
import Dispatch
import Glibc
import RunLoopKit

/// The tool's state: main-actor isolated, so only the main thread touches it.
@MainActor
final class Dashboard {
    var ticks = 0
    var messages = 0
    var bytes = 0
    var signals = 0
    var reports: [String] = []
    /// Callbacks that ran elsewhere than the main thread (must stay empty).
    var offMainThread: [String] = []

    /// What to do once all the work has been seen (with --self-interrupt: send SIGINT).
    var whenDone: (() -> Void)?
    var expected = 0

    func note(_ what: String) {
        if !ThreadRunLoop.main.isOwnerThread { offMainThread.append(what) }
    }

    /// Called after each update: once every message, byte and report is in and the timer
    /// has ticked a few times, runs `whenDone`, once.
    func checkDone() {
        guard messages == expected, bytes == expected, reports == ["worker done"], ticks >= 3,
              let done = whenDone else { return }
        whenDone = nil
        done()
    }
}

struct MainActorTool: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "main-actor", abstract: "The main loop with @MainActor state and every kind of source.")

    @Flag(help: "Send this process SIGINT once the work is done, to show the clean stop.")
    var selfInterrupt = false

    @Option(help: "How many messages (and bytes, and SIGUSR1s) the worker sends.")
    var messages = 20

    func run() throws {
        // main.swift runs on the main thread, which is the main actor's while the main loop
        // services the main queue.
        try MainActor.assumeIsolated { try runOnMainThread() }
    }

    @MainActor
    private func runOnMainThread() throws {
        let dashboard = Dashboard()
        let loop = MainLoop.loop
        let total = messages
        dashboard.expected = total
        if selfInterrupt {
            dashboard.whenDone = {
                print("main: all work seen; sending myself SIGINT, as Ctrl-C would")
                kill(getpid(), SIGINT)
            }
        }

        // A port of the main thread: messages from the worker.
        let port = try LocalPort { message in
            MainActor.assumeIsolated {
                dashboard.note("port")
                dashboard.messages += 1
                dashboard.checkDone()
            }
            return nil
        }
        loop.add(port, to: .common)

        // A descriptor source: a pipe the worker writes into.
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw ExitCode.failure }
        _ = fcntl(fds[0], F_SETFL, O_NONBLOCK)
        let readEnd = fds[0], writeEnd = fds[1]
        let pipeSource = DescriptorSource(descriptor: readEnd, watching: .readable, ownership: .owned) { event in
            var buffer = [UInt8](repeating: 0, count: 256)
            let count = read(readEnd, &buffer, buffer.count)
            MainActor.assumeIsolated {
                dashboard.note("pipe")
                if count > 0 { dashboard.bytes += count }
                dashboard.checkDone()
            }
            if case .ready(let events) = event, events.contains(.hangUp), count <= 0 {
                print("pipe: the writer closed it")
            }
        }
        loop.add(pipeSource, to: .common)

        // A signal source: SIGUSR1s, coalesced between calls.
        let usr1 = try SignalSource(.user1) { count in
            MainActor.assumeIsolated {
                dashboard.note("signal")
                dashboard.signals += count
            }
        }
        loop.add(usr1, to: .common)

        // A timer of the main loop.
        let timer = LoopTimer(after: .milliseconds(20), repeating: .milliseconds(20)) { _ in
            MainActor.assumeIsolated {
                dashboard.note("timer")
                dashboard.ticks += 1
                dashboard.checkDone()
            }
        }
        loop.add(timer, to: .common)

        // The worker: sends, writes, signals, then reports on the main actor.
        let worker = try WorkerThread(name: "main-actor-worker")
        let remote = port.remote
        try worker.perform {
            for index in 0..<total {
                try? remote.send(LoopMessage(id: Int32(index), text: "message \(index)"))
                var byte = UInt8(truncatingIfNeeded: index)
                _ = write(writeEnd, &byte, 1)
                kill(getpid(), SIGUSR1)
            }
            Task {
                await MainActor.run {
                    dashboard.note("MainActor.run")
                    dashboard.reports.append("worker done")
                }
                DispatchQueue.main.async {
                    MainActor.assumeIsolated {
                        dashboard.note("main queue")
                        print("worker: done; the main actor knows")
                        dashboard.checkDone()
                    }
                }
            }
        }

        print("main: running the main loop (Ctrl-C or SIGTERM stops it)")
        let stoppedBy = try MainLoop.run(stoppingOn: [.interrupt, .terminate])
        print("main: stopped by \(stoppedBy.map(String.init(describing:)) ?? "stop()")")

        worker.stop() // its queued work runs first
        close(writeEnd)
        pipeSource.invalidate() // closes the read end it owns
        usr1.invalidate()
        timer.invalidate()
        port.invalidate()

        print("ticks \(dashboard.ticks), messages \(dashboard.messages)/\(total), bytes \(dashboard.bytes)/\(total), "
            + "SIGUSR1 deliveries \(dashboard.signals) (sent \(total), merged when pending), reports \(dashboard.reports)")
        guard dashboard.offMainThread.isEmpty else {
            print("ran off the main thread: \(dashboard.offMainThread)")
            throw ExitCode.failure
        }
        guard dashboard.messages == total, dashboard.bytes == total, dashboard.signals >= 1,
              dashboard.reports == ["worker done"], !selfInterrupt || stoppedBy == .interrupt
        else { throw ExitCode.failure }
        print("main: everything ran on the main thread; clean exit")
    }
}

MainActorTool.main()
