// The check-in protocol between processes: the program spawns K worker processes of
// itself, which register their own names, check in by name over ipc, answer job requests
// and exit when told. Each worker is a child process watched by a ChildProcessSource, so
// its end is heard on the main loop the moment it happens. With --kill-one, one worker is
// killed (SIGKILL) after checking in: the main process notices at once (it prints how long
// from kill to notice), sends it nothing more, reclaims the dead worker's name and still
// exits cleanly. Requests keep their timeouts, for peers that are not children.
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

        let pids = try (0..<workers).map { index in try spawnWorker(mainName: mainName, index: index) }
        // Every worker is a child: how it ended is heard on this thread the moment it does.
        var ended: [Int: ChildExit] = [:]
        var noticedAt: [Int: Deadline] = [:]
        for (index, pid) in pids.enumerated() {
            let child = try ChildProcessSource(pid: pid) { exit in
                noticedAt[index] = .now()
                ended[index] = exit
                print("main: worker-\(index) (pid \(pid)) \(exit)")
            }
            loop.add(child, to: .default)
        }
        defer { for (index, pid) in pids.enumerated() where ended[index] == nil { kill(pid, SIGKILL) } }

        let deadline = Deadline.after(.seconds(30))
        while checkedIn.count < workers && Deadline.now() < deadline { loop.run(mode: .default, before: deadline) }
        guard checkedIn.count == workers else {
            print("main: only \(checkedIn.count)/\(workers) workers checked in")
            throw ExitCode.failure
        }

        let victim = killOne ? 0 : nil
        if let victim {
            let killedAt = Deadline.now()
            kill(pids[victim], SIGKILL)
            let noticeDeadline = Deadline.after(.seconds(10))
            while ended[victim] == nil && Deadline.now() < noticeDeadline {
                loop.run(mode: .default, before: noticeDeadline)
            }
            guard let noticed = noticedAt[victim] else {
                print("main: the killed worker-\(victim) was never noticed")
                throw ExitCode.failure
            }
            let milliseconds = Double(noticed.rawValue - killedAt.rawValue) / 1_000_000
            print("main: killed worker-\(victim) (pid \(pids[victim])), noticed "
                + String(format: "%.3f", milliseconds) + " ms after the kill")
        }

        var answered = 0
        var noticedDead: [Int] = []
        for index in 0..<workers {
            if let exit = ended[index] {
                print("main: worker-\(index) is gone (\(exit)): no request sent")
                noticedDead.append(index)
                continue
            }
            let name = "\(mainName).worker-\(index)"
            do {
                let reply = try checkedIn[name]!.sendRequest(LoopMessage(id: jobRequest, text: "job \(index)"),
                                                             sendTimeout: .seconds(2), receiveTimeout: .seconds(5))
                print("main: reply '\(reply.text ?? "")'")
                answered += 1
            } catch {
                print("main: worker-\(index) did not answer: \(error)")
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

        for (name, port) in checkedIn where !noticedDead.contains(where: { name.hasSuffix(".worker-\($0)") }) {
            do { try port.send(LoopMessage(id: exitMessage), timeout: .milliseconds(500)) } catch {
                print("main: could not tell \(name) to exit: \(error)")
            }
        }
        let exitDeadline = Deadline.after(.seconds(10))
        while ended.count < workers && Deadline.now() < exitDeadline { loop.run(mode: .default, before: exitDeadline) }
        let exitedCleanly = (0..<workers).filter { $0 != victim && ended[$0] == .exited(0) }.count
        mainPort.invalidate()

        let expectedAnswers = workers - (victim == nil ? 0 : 1)
        print("checked in \(checkedIn.count)/\(workers) workers, \(answered)/\(expectedAnswers) answered, "
            + "\(noticedDead.count) noticed dead by their child source, \(exitedCleanly)/\(expectedAnswers) exited cleanly")
        guard answered == expectedAnswers, noticedDead == (victim.map { [$0] } ?? []), reclaimed,
              exitedCleanly == expectedAnswers
        else { throw ExitCode.failure }
    }

    /// Spawns a worker process of this program with `posix_spawn` (not Foundation's
    /// `Process`, which would reap it before its child source could).
    private func spawnWorker(mainName: String, index: Int) throws -> pid_t {
        let path = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        let arguments = [path, "--worker-of", mainName, "--index", "\(index)"]
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, nil, nil, argv, environ)
        guard rc == 0 else {
            print("main: cannot spawn worker-\(index): \(String(cString: strerror(rc)))")
            throw ExitCode.failure
        }
        return pid
    }
}

MultiprocessCheckin.main()
