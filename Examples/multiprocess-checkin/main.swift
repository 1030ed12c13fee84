// The check-in protocol between processes: the program spawns K worker processes of
// itself, which register their own names, check in by name over ipc, answer job requests
// and exit when told. With --kill-one, one worker is killed (SIGKILL) after checking in:
// the main process notices by timeout, reports it, reclaims the dead worker's name and
// still exits cleanly.
import ArgumentParser
import Foundation
import Glibc
import RunLoopKit

let checkinMessage: Int32 = 100
let jobRequest: Int32 = 1
let exitMessage: Int32 = 3

struct MultiprocessCheckin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "multiprocess-checkin", abstract: "The check-in protocol between processes over ipc.")

    @Option(help: "How many worker processes to spawn.")
    var workers = 3

    @Flag(help: "Kill one worker with SIGKILL after it checked in, to show how that is noticed.")
    var killOne = false

    @Option(help: .hidden)
    var workerOf: String?

    @Option(help: .hidden)
    var index = 0

    @Option(help: .hidden)
    var lifetime = 60

    func run() throws {
        if let mainName = workerOf {
            try runWorker(mainName: mainName)
        } else {
            try runMain()
        }
    }

    // MARK: - Worker process

    private func runWorker(mainName: String) throws {
        let mainPort = try RemotePort(named: mainName)
        let myName = "\(mainName).worker-\(index)"
        var shouldExit = false
        let port = try LocalPort(name: myName) { message in
            switch message.id {
            case jobRequest: // the handler's return value is the reply
                return LoopMessage(id: jobRequest, text: "\(message.text ?? "") done by pid \(getpid())")
            case exitMessage:
                shouldExit = true
            default:
                break
            }
            return nil
        }
        ThreadRunLoop.current.add(port, to: .default)
        try mainPort.send(LoopMessage(id: checkinMessage, text: myName), timeout: .seconds(10))
        let deadline = Deadline.after(.seconds(Int64(lifetime))) // never outlive a lost main process for long
        while !shouldExit && Deadline.now() < deadline {
            ThreadRunLoop.current.run(mode: .default, before: deadline)
        }
        port.invalidate()
    }

    // MARK: - Main process

    private func runMain() throws {
        let loop = ThreadRunLoop.current
        let mainName = "runloopkit.multiprocess.\(getpid())"
        var checkedIn: [String: RemotePort] = [:]
        let mainPort = try LocalPort(name: mainName) { message in
            guard message.id == checkinMessage, let name = message.text else { return nil }
            do {
                checkedIn[name] = try RemotePort(named: name)
                print("main: \(name) checked in (\(checkedIn.count)/\(self.workers))")
            } catch {
                print("main: check-in from '\(name)' but: \(error)")
            }
            return nil
        }
        loop.add(mainPort, to: .default)
        print("main: registered '\(mainName)', spawning \(workers) worker processes")

        let processes = try (0..<workers).map { index in try spawnWorker(mainName: mainName, index: index) }
        defer { for process in processes where process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        let deadline = Deadline.after(.seconds(30))
        while checkedIn.count < workers && Deadline.now() < deadline { loop.run(mode: .default, before: deadline) }
        guard checkedIn.count == workers else {
            print("main: only \(checkedIn.count)/\(workers) workers checked in")
            throw ExitCode.failure
        }

        let victim = killOne ? 0 : nil
        if let victim {
            kill(processes[victim].processIdentifier, SIGKILL)
            processes[victim].waitUntilExit()
            print("main: killed worker-\(victim) (pid \(processes[victim].processIdentifier))")
        }

        var answered = 0
        var noticedDead: [Int] = []
        for index in 0..<workers {
            let name = "\(mainName).worker-\(index)"
            do {
                let reply = try checkedIn[name]!.sendRequest(LoopMessage(id: jobRequest, text: "job \(index)"),
                                                             sendTimeout: .seconds(2), receiveTimeout: .seconds(5))
                print("main: reply '\(reply.text ?? "")'")
                answered += 1
            } catch {
                print("main: worker-\(index) did not answer: \(error)")
                noticedDead.append(index)
            }
        }

        var reclaimed = true
        if let victim {
            // The dead worker's name is free again: its lock died with it.
            do {
                let reused = try LocalPort(name: "\(mainName).worker-\(victim)")
                print("main: reclaimed the dead worker's name '\(reused.name ?? "")'")
                reused.invalidate()
            } catch {
                print("main: could not reclaim the dead worker's name: \(error)")
                reclaimed = false
            }
        }

        for (name, port) in checkedIn {
            do { try port.send(LoopMessage(id: exitMessage), timeout: .milliseconds(500)) } catch {
                print("main: could not tell \(name) to exit: \(error)")
            }
        }
        var exitedCleanly = 0
        for (index, process) in processes.enumerated() where index != victim {
            if waitForExit(process, seconds: 10) && process.terminationStatus == 0 { exitedCleanly += 1 }
        }
        mainPort.invalidate()

        let expectedAnswers = workers - (victim == nil ? 0 : 1)
        print("checked in \(checkedIn.count)/\(workers) workers, \(answered)/\(expectedAnswers) answered, "
            + "\(noticedDead.count) noticed dead by timeout, \(exitedCleanly)/\(expectedAnswers) exited cleanly")
        guard answered == expectedAnswers, noticedDead == (victim.map { [$0] } ?? []), reclaimed,
              exitedCleanly == expectedAnswers
        else { throw ExitCode.failure }
    }

    private func spawnWorker(mainName: String, index: Int) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = ["--worker-of", mainName, "--index", "\(index)"]
        try process.run()
        return process
    }

    /// Waits for a worker process to exit, asleep on the run loop: its termination handler
    /// signals an input source.
    private func waitForExit(_ process: Process, seconds: Int) -> Bool {
        let loop = ThreadRunLoop.current
        let exited = InputSource {}
        loop.add(exited, to: "wait-for-exit")
        defer { exited.invalidate() }
        process.terminationHandler = { _ in exited.signalAndWake() }
        let deadline = Deadline.after(.seconds(seconds))
        while process.isRunning && Deadline.now() < deadline {
            _ = loop.run(mode: "wait-for-exit", until: deadline, returnAfterSourceHandled: true)
        }
        return !process.isRunning
    }
}

MultiprocessCheckin.main()
