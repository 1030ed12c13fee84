// The check-in protocol between processes: the program starts K worker processes of
// itself, which register their own names, check in by name over ipc, answer job requests
// and exit when told (or as soon as the main's port is gone: each worker watches it).
//
// How the main process hears a worker end:
// - by default every worker is its child, watched by a ChildProcessSource: its exit
//   status is heard on the main loop the moment it ends;
// - with --detached every worker is started by a launcher process that exits at once, so
//   the worker is reparented (to init, or the nearest subreaper) and is no child of the
//   main: the main watches the port the worker checked in with (a PortLossSource, which
//   pins the pid the name's lock tells), and hears there the worker's death, or its giving
//   the name back when it exits.
// With --kill-one, worker-0 is killed (SIGKILL) after checking in: the main's loop callback
// prints how long from the kill it noticed, in µs; the main sends it nothing more,
// reclaims the dead worker's name and still exits cleanly. Nothing polls: the main sleeps
// in its run loop until a check-in, a reply or a worker's end.
import ArgumentParser
import Foundation
import Glibc
import RunLoopKit

let checkinMessage: Int32 = 100
let jobRequest: Int32 = 1
let exitMessage: Int32 = 3

/// How the main process heard that a worker ended.
enum WorkerEnd: Equatable, CustomStringConvertible {
    /// A child's end, from its `ChildProcessSource`.
    case exited(ChildExit)
    /// A detached worker's end, from the `PortLossSource` watching its port.
    case portLost(PortLoss)

    var description: String {
        switch self {
        case .exited(let exit): "\(exit)"
        case .portLost(let loss): "is gone, as its port says: \(loss)"
        }
    }
}

struct MultiprocessCheckin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "multiprocess-checkin", abstract: "The check-in protocol between processes over ipc.")

    @Option(help: "How many worker processes to spawn.")
    var workers = 3

    @Flag(help: "Kill one worker with SIGKILL after it checked in, to show how that is noticed.")
    var killOne = false

    @Flag(help: """
        Start each worker through a launcher process that exits at once, so that no worker is \
        a child of this process: their ends are heard through their ports (PortLossSource).
        """)
    var detached = false

    @Option(help: .hidden)
    var workerOf: String?

    @Option(help: .hidden)
    var launchWorkerOf: String?

    @Option(help: .hidden)
    var index = 0

    @Option(help: .hidden)
    var lifetime = 60

    func run() throws {
        if let mainName = launchWorkerOf {
            // The launcher: starts the worker and ends, which orphans it.
            _ = try spawnSelf(["--worker-of", mainName, "--index", "\(index)"])
        } else if let mainName = workerOf {
            try runWorker(mainName: mainName)
        } else {
            try runMain()
        }
    }

    // MARK: - Worker process

    private func runWorker(mainName: String) throws {
        let loop = ThreadRunLoop.current
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
        loop.add(port, to: .default)
        // Child or not, a worker learns at once that its main process is gone.
        let mainLoss = try PortLossSource(watching: mainPort) { _ in shouldExit = true }
        loop.add(mainLoss, to: .default)
        try mainPort.send(LoopMessage(id: checkinMessage, text: myName), timeout: .seconds(10))
        let deadline = Deadline.after(.seconds(Int64(lifetime))) // a bound, should all else fail
        while !shouldExit && Deadline.now() < deadline {
            loop.run(mode: .default, before: deadline)
        }
        mainLoss.invalidate()
        port.invalidate()
    }

    // MARK: - Main process

    private func runMain() throws {
        let loop = ThreadRunLoop.current
        let mainName = "runloopkit.multiprocess.\(getpid())"
        let workerPrefix = "\(mainName).worker-"
        var checkedIn: [Int: RemotePort] = [:]
        // A child's pid from its spawn; a detached worker's from its name's lock, at check-in.
        var workerPIDs: [Int: pid_t] = [:]
        var parentPIDs: [Int: pid_t] = [:]
        var ended: [Int: WorkerEnd] = [:]
        var killedAt: [Int: Deadline] = [:]

        /// A worker's end, told by its source on this loop's thread.
        func heard(_ end: WorkerEnd, of index: Int) {
            let noticed = Deadline.now()
            ended[index] = end
            var line = "main: worker-\(index) (pid \(workerPIDs[index] ?? 0)) \(end)"
            if let killed = killedAt[index] {
                line += ", noticed \((noticed.rawValue - killed.rawValue) / 1_000) µs after the kill"
            }
            print(line)
        }

        let mainPort = try LocalPort(name: mainName) { message in
            guard message.id == checkinMessage, let name = message.text, name.hasPrefix(workerPrefix),
                  let index = Int(name.dropFirst(workerPrefix.count)) else { return nil }
            do {
                let port = try RemotePort(named: name)
                var line = "main: worker-\(index) checked in (\(checkedIn.count + 1)/\(self.workers))"
                if self.detached {
                    // No child of this process: its end is heard through its port. The watch
                    // pins the process that holds the name's lock, whose pid the lock tells.
                    let watch = try PortLossSource(watching: port) { loss in heard(.portLost(loss), of: index) }
                    loop.add(watch, to: .default)
                    workerPIDs[index] = watch.ownerPID
                    let parent = parentPID(of: watch.ownerPID)
                    parentPIDs[index] = parent
                    line += ", pid \(watch.ownerPID) (its name's lock says), parent pid \(parent)"
                        + " (this process is pid \(getpid())): watching its port"
                }
                checkedIn[index] = port
                print(line)
            } catch {
                print("main: check-in from '\(name)' but: \(error)")
            }
            return nil
        }
        loop.add(mainPort, to: .default)

        if detached {
            print("main: registered '\(mainName)', launching \(workers) worker processes through launchers that exit at once")
            for index in 0..<workers {
                // The launcher is this process's child (reaped here at once); its worker is not.
                let launcher = try spawnSelf(["--launch-worker-of", mainName, "--index", "\(index)"])
                var status: Int32 = 0
                while waitpid(launcher, &status, 0) == -1 && errno == EINTR {}
                guard status == 0 else {
                    print("main: the launcher of worker-\(index) failed (wait status \(status))")
                    throw ExitCode.failure
                }
            }
        } else {
            print("main: registered '\(mainName)', spawning \(workers) worker processes")
            for index in 0..<workers {
                // A child: how it ended is heard on this thread the moment it does.
                let pid = try spawnSelf(["--worker-of", mainName, "--index", "\(index)"])
                workerPIDs[index] = pid
                let child = try ChildProcessSource(pid: pid) { exit in heard(.exited(exit), of: index) }
                loop.add(child, to: .default)
            }
        }
        defer { for (index, pid) in workerPIDs where ended[index] == nil { kill(pid, SIGKILL) } }

        let deadline = Deadline.after(.seconds(30))
        while checkedIn.count < workers && Deadline.now() < deadline { loop.run(mode: .default, before: deadline) }
        guard checkedIn.count == workers else {
            print("main: only \(checkedIn.count)/\(workers) workers checked in")
            throw ExitCode.failure
        }
        if let child = parentPIDs.first(where: { $0.value == getpid() || $0.value == 0 }) {
            print("main: worker-\(child.key) is a child of this process, or its parent is unknown")
            throw ExitCode.failure
        }

        let victim = killOne ? 0 : nil
        if let victim, let pid = workerPIDs[victim] {
            killedAt[victim] = .now()
            kill(pid, SIGKILL)
            let noticeDeadline = Deadline.after(.seconds(10))
            while ended[victim] == nil && Deadline.now() < noticeDeadline {
                loop.run(mode: .default, before: noticeDeadline)
            }
            guard ended[victim] != nil else {
                print("main: the killed worker-\(victim) was never noticed")
                throw ExitCode.failure
            }
        }

        var answered = 0
        var noticedDead: [Int] = []
        for index in 0..<workers {
            if let end = ended[index] {
                print("main: worker-\(index) \(end): no request sent")
                noticedDead.append(index)
                continue
            }
            do {
                let reply = try checkedIn[index]!.sendRequest(LoopMessage(id: jobRequest, text: "job \(index)"),
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
                let reused = try LocalPort(name: "\(workerPrefix)\(victim)")
                print("main: reclaimed the dead worker's name '\(reused.name ?? "")'")
                reused.invalidate()
            } catch {
                print("main: could not reclaim the dead worker's name: \(error)")
                reclaimed = false
            }
        }

        for (index, port) in checkedIn where ended[index] == nil {
            do { try port.send(LoopMessage(id: exitMessage), timeout: .milliseconds(500)) } catch {
                print("main: could not tell worker-\(index) to exit: \(error)")
            }
        }
        let exitDeadline = Deadline.after(.seconds(10))
        while ended.count < workers && Deadline.now() < exitDeadline { loop.run(mode: .default, before: exitDeadline) }
        // A child's exit status says it exited cleanly. A detached worker's status is its
        // parent's to collect: what this process hears is that its port is gone.
        let endedWhenTold = (0..<workers).filter { index in
            guard index != victim, let end = ended[index] else { return false }
            if case .portLost = end { return true }
            return end == .exited(.exited(0))
        }.count
        let victimEnd: WorkerEnd? = detached ? .portLost(.ownerDied) : .exited(.signalled(SIGKILL, coreDumped: false))
        mainPort.invalidate()

        let expectedAnswers = workers - (victim == nil ? 0 : 1)
        print("checked in \(checkedIn.count)/\(workers) workers, \(answered)/\(expectedAnswers) answered, "
            + "\(noticedDead.count) noticed dead by their \(detached ? "port-loss" : "child") source, "
            + "\(endedWhenTold)/\(expectedAnswers) \(detached ? "ended when told" : "exited cleanly")")
        guard answered == expectedAnswers, noticedDead == (victim.map { [$0] } ?? []), reclaimed,
              endedWhenTold == expectedAnswers, victim.map({ ended[$0] == victimEnd }) ?? true
        else { throw ExitCode.failure }
    }

    /// Spawns this program with `arguments` with `posix_spawn` (not Foundation's `Process`,
    /// which would reap the child before its child source could) and returns its pid.
    private func spawnSelf(_ arguments: [String]) throws -> pid_t {
        let path = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, nil, nil, argv, environ)
        guard rc == 0 else {
            print("cannot spawn \(arguments): \(String(cString: strerror(rc)))")
            throw ExitCode.failure
        }
        return pid
    }
}

/// A process's parent, from `/proc/<pid>/status` (0 if it cannot be read).
func parentPID(of pid: pid_t) -> pid_t {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
    let line = status.split(separator: "\n").first { $0.hasPrefix("PPid:") }
    return line.flatMap { pid_t($0.dropFirst("PPid:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
}

MultiprocessCheckin.main()
