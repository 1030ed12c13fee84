import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport

/// `exit-flush-probe` (`Tests/probes/exit-flush-probe`) started with `arguments`, sharing
/// this process's runtime directory, its output read as it comes.
func startExitFlushProbe(_ arguments: [String]) throws -> SpawnedProcess {
    try SpawnedProcess([try builtExecutable("exit-flush-probe")] + arguments,
                       environment: ["RUNLOOPKIT_RUNTIME_DIR": try RuntimeDirectory.path()])
}

/// A process's schedule at one instant, as `exit-flush-probe` prints it (`schedule()`) or
/// as read from outside (`init(ofProcess:)`): the monotonic clock (read first), the
/// machine's stolen time (a virtual CPU the host did not run), and each thread's CPU time
/// and run-queue wait. What a process's wait took beyond what its code waits for is
/// bounded by what it spent running or ready to run, and by the time stolen from the
/// machine: `unaccountedWait(since:)` takes those out.
struct ProcessSchedule {
    /// CLOCK_MONOTONIC, in nanoseconds.
    var clock: Int64
    /// /proc/stat's steal, in clock ticks.
    var stealTicks: Int64
    /// Per thread id: CPU time plus run-queue wait (schedstat), in nanoseconds.
    var busy: [Int32: Int64]

    /// Parses `<monotonic ns> steal=<ticks> <tid>=<cpu>+<wait> …`.
    init?(_ line: Substring) {
        let fields = line.split(separator: " ")
        guard fields.count >= 2, let clock = Int64(fields[0]), fields[1].hasPrefix("steal="),
              let steal = Int64(fields[1].dropFirst("steal=".count)) else { return nil }
        self.clock = clock
        stealTicks = steal
        busy = [:]
        for field in fields.dropFirst(2) {
            let parts = field.split(whereSeparator: { $0 == "=" || $0 == "+" })
            guard parts.count == 3, let tid = Int32(parts[0]), let cpu = Int64(parts[1]), let wait = Int64(parts[2])
            else { return nil }
            busy[tid] = cpu + wait
        }
    }

    /// The line the probe printed after `label` (`ending`, `end`).
    init?(printedAs label: String, in stdout: String) {
        guard let line = stdout.split(separator: "\n").first(where: { $0.hasPrefix(label + " ") }) else { return nil }
        self.init(line.dropFirst(label.count + 1))
    }

    /// Process `pid`'s, read from /proc now.
    init(ofProcess pid: pid_t) {
        var line = ""
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let cpu = (try? String(contentsOfFile: "/proc/stat", encoding: .utf8))?.split(separator: "\n").first?
            .split(separator: " ") ?? []
        line = "\(Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)) steal=\(cpu.count > 8 ? cpu[8] : "0")"
        for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
            let fields = ((try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/schedstat", encoding: .utf8)) ?? "")
                .split(separator: " ")
            if fields.count >= 2 { line += " \(task)=\(fields[0])+\(fields[1].filter { $0 != "\n" })" }
        }
        self.init(Substring(line))!
        // Taken after the threads were read: a later start only shortens the interval measured.
        clock_gettime(CLOCK_MONOTONIC, &now)
        clock = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    /// The time from `start` to this one that neither the process's threads running or
    /// waiting for a CPU, nor the host's stealing the machine's CPUs, account for: what the
    /// process slept through. Every thread of `start` must still be there (else nil): one
    /// that ended took its figures with it. Stolen time is counted in clock ticks, so up
    /// to one tick more of it may have passed than the figures say.
    func unaccountedWait(since start: ProcessSchedule) -> Duration? {
        var busyNanoseconds: Int64 = 0
        for (tid, before) in start.busy {
            guard let after = busy[tid] else { return nil }
            busyNanoseconds += after - before
        }
        for (tid, after) in busy where start.busy[tid] == nil { busyNanoseconds += after } // a thread started since
        let tick = 1_000_000_000 / Int64(sysconf(Int32(_SC_CLK_TCK)))
        let stolen = (stealTicks - start.stealTicks + 1) * tick
        return .nanoseconds(clock - start.clock - busyNanoseconds - stolen)
    }
}
