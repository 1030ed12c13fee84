import CLinuxPoll
import Foundation
import Glibc
import LatencyStatistics
import RunLoopKit
import Synchronization

/// A named port's owner process SIGKILLed → the watcher's `PortLossSource` handler, on its
/// loop's thread: the monotonic clock read right before `kill(2)`, then in the handler.
/// The floor: a thread blocked in `poll(2)` on a pidfd of the same kind of owner.
/// Each kill is of a fresh owner (this executable, `--child peer-death-owner`).
///
/// Placement (see `Placement`): the owner's process runs on the receiver's CPU, the watcher
/// (the thread that kills and waits) on the sender's. A killed process spends its last
/// millisecond unmapping its memory in the kernel; a watcher queued on that CPU waits for
/// it whatever it watches (the pidfd too), so on two CPUs shared at random the tail is the
/// scheduler's, not the watch's. `--placement free` shows that case.
enum PeerDeathCase {
    static let name = "peer-death"
    static let childRole = "peer-death-owner"

    static func run(_ config: BenchConfig) -> CaseOutcome {
        let runLoopKit = RunLoopKitPeerDeath()
        let distributions = Harness.latencies([runLoopKit, PidfdPeerDeath()], rounds: config.quick ? 2 : 4,
                                              batch: config.quick ? 25 : 50, warmUp: 5, only: config.only)
        var outcome = CaseOutcome(name: name, distributions: distributions, chartCaption: "SIGKILL of a port's owner → handler")
        outcome.metrics = [
            distributions.metric(name, "us_p50", targets: [.atMostTimes(1.1, peer: "pidfd-poll")]) { $0.p50 },
            distributions.metric(name, "us_p99", targets: [.atMost(1000)]) { $0.p99 },
        ]
        outcome.notes = ["\(name): the watcher's thread used \(Format.value(runLoopKit.cpuPerLoss / 1000)) µs of CPU per loss, "
                         + "making the source included (pidfd, life page, lock checks); none while it waits"]
        return outcome
    }

    /// The owner: a port named `name` on a loop thread; prints `ready`, then serves until
    /// it is killed or its standard input closes.
    static func serveAsChild(name: String) -> Never {
        let owner = RunLoopKitThread(cpu: nil) {
            do {
                ThreadRunLoop.current.add(try LocalPort(name: name), to: .default)
            } catch {
                fatalError("child: \(error)")
            }
        }
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        while readLine() != nil {}
        _ = owner
        exit(0)
    }

    /// A fresh owner's process and port.
    static func startOwner() -> (process: ChildProcess, port: RemotePort) {
        let name = "runloopkit-bench.peer-death.\(getpid()).\(serial.add(1, ordering: .relaxed).newValue)"
        let process = ChildProcess(arguments: ["--child", childRole, "--child-port", name]
                                   + (Placement.receiver.map { ["--cpu", String($0)] } ?? []))
        do {
            return (process, try RemotePort(named: name))
        } catch {
            fatalError("the owner's port \(name): \(error)")
        }
    }

    /// Removes what a killed owner leaves in the runtime directory (its socket, lock, life
    /// page and descriptor side channel files).
    static func removeFiles(of port: RemotePort) {
        let socket = String(port.address.rawValue.dropFirst("ipc://".count))
        unlink(socket)
        unlink(String(socket.dropLast(".sock".count)) + ".lock")
        unlink(String(socket.dropLast(".sock".count)) + ".fds")
        unlink(String(socket.dropLast(".sock".count)) + ".life")
    }

    private static let serial = Atomic<Int>(0)
}

final class RunLoopKitPeerDeath: LatencyContender {
    let name = "runloopkit"
    private let driver = CommandThread(cpu: Placement.sender)
    private var cpu: UInt64 = 0, losses = 0

    /// The watcher thread's CPU per loss, ns.
    var cpuPerLoss: Double { losses == 0 ? .nan : Double(cpu) / Double(losses) }

    func measure(_ count: Int) -> LatencyHistogram {
        var recorder = LatencyHistogram()
        for _ in 0..<count {
            let (owner, port) = PeerDeathCase.startOwner()
            let pid = owner.pid
            let (latency, used) = driver.run { () -> (UInt64, UInt64) in
                let loop = ThreadRunLoop.current
                let before = System.threadCPUTime()
                let firedAt = Confined<UInt64>(0)
                let source: PortLossSource
                do {
                    source = try PortLossSource(watching: port) { loss in
                        firedAt.value = Clock.now()
                        precondition(loss == .ownerDied, "\(loss)")
                    }
                } catch {
                    fatalError("watching \(port): \(error)")
                }
                loop.add(source, to: .default)
                let killedAt = Clock.now()
                kill(pid, SIGKILL)
                while firedAt.value == 0 { _ = loop.run(mode: .default, timeout: .seconds(5), returnAfterSourceHandled: true) }
                return (firedAt.value - killedAt, System.threadCPUTime() - before)
            }
            owner.finish()
            PeerDeathCase.removeFiles(of: port)
            recorder.record(nanoseconds: latency)
            cpu += used
            losses += 1
        }
        return recorder
    }

    func finish() { driver.finish() }
}

/// The kernel's floor: `poll(2)` on a pidfd of the owner, from the thread that kills it.
final class PidfdPeerDeath: LatencyContender {
    let name = "pidfd-poll"
    private let driver = CommandThread(cpu: Placement.sender)

    func measure(_ count: Int) -> LatencyHistogram {
        var recorder = LatencyHistogram()
        for _ in 0..<count {
            let (owner, port) = PeerDeathCase.startOwner()
            let pid = owner.pid
            let latency = driver.run { () -> UInt64 in
                let pidfd = clinux_pidfd_open(pid)
                precondition(pidfd >= 0, "pidfd_open: \(errno)")
                defer { close(pidfd) }
                var entry = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
                let killedAt = Clock.now()
                kill(pid, SIGKILL)
                while poll(&entry, 1, -1) != 1 {}
                return Clock.now() - killedAt
            }
            owner.finish()
            PeerDeathCase.removeFiles(of: port)
            recorder.record(nanoseconds: latency)
        }
        return recorder
    }

    func finish() { driver.finish() }
}
