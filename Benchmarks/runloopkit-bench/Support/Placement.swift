import ArgumentParser
import Foundation
import Glibc
import Synchronization

/// Where the threads of a case run. On a machine with few cores (or a virtual machine,
/// where waking an idle virtual CPU costs tens of microseconds), the scheduler's choice
/// of CPU for two threads that hand a message back and forth changes a round trip several
/// times over, differently from one thread start to the next. So by default the two
/// threads of every latency pair share CPU 0 (each round trip is then the software's own
/// cost plus two local context switches), as do the threads that `checkin-1000` and
/// `thread-cycles` create (and, for `task-hop`, every thread of the process), while a
/// stream's sender and receiver get CPUs 0 and 1, as do `peer-death`'s watcher and the
/// owner it kills (a dying process holds its CPU while the kernel unmaps it). The lone
/// timer and idle threads are left to the scheduler.
/// `--placement free` leaves all threads to the scheduler.
enum Placement {
    enum Mode: String, CaseIterable, ExpressibleByArgument, Sendable {
        case paired
        case free
    }

    private static let current = Mutex<Mode>(.paired)

    static var mode: Mode {
        get { current.withLock { $0 } }
        set { current.withLock { $0 = newValue } }
    }

    /// The CPU of both threads of a latency pair (and of a child process's threads).
    static var pair: Int? { mode == .paired ? 0 : nil }
    /// The CPUs of a stream's sender and receiver (and of peer-death's watcher and owner).
    static var sender: Int? { mode == .paired ? 0 : nil }
    static var receiver: Int? { mode == .paired ? min(1, System.processorCount - 1) : nil }

    static var caption: String {
        switch mode {
        case .paired: "communicating threads pinned (see docs)"
        case .free: "threads placed by the scheduler"
        }
    }

    private typealias SetAffinity = @convention(c) (pid_t, Int, UnsafeRawPointer) -> Int32

    /// `sched_setaffinity`, looked up at run time (glibc declares it only under _GNU_SOURCE).
    private static let setAffinity: SetAffinity? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sched_setaffinity") else { return nil }
        return unsafeBitCast(symbol, to: SetAffinity.self)
    }()

    private typealias GetAffinity = @convention(c) (pid_t, Int, UnsafeMutableRawPointer) -> Int32

    private static let getAffinity: GetAffinity? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sched_getaffinity") else { return nil }
        return unsafeBitCast(symbol, to: GetAffinity.self)
    }()

    /// Runs `body` with every thread of the process on `cpu` (nil: as they are), those it
    /// starts meanwhile included, then gives each thread the mask it had, or the calling
    /// thread's for one started meanwhile: for a case whose threads are not all its own
    /// (the cooperative pool's, Dispatch's).
    static func withProcessPinned<T>(to cpu: Int?, _ body: () -> T) -> T {
        guard let cpu, let setAffinity, let getAffinity else { return body() }
        func mask(of thread: pid_t) -> [UInt64] {
            var mask = [UInt64](repeating: 0, count: 16)
            if mask.withUnsafeMutableBytes({ getAffinity(thread, $0.count, $0.baseAddress!) }) != 0 { mask = [] }
            return mask
        }
        func set(_ mask: [UInt64], of thread: pid_t) {
            _ = mask.withUnsafeBytes { setAffinity(thread, $0.count, $0.baseAddress!) }
        }
        let pinned = Placement.mask(onlyOf: cpu)
        let callers = mask(of: 0)
        var saved: [pid_t: [UInt64]] = [:]
        for thread in threadIDs() {
            saved[thread] = mask(of: thread)
            set(pinned, of: thread)
        }
        defer {
            for thread in threadIDs() {
                let original = saved[thread] ?? callers
                if !original.isEmpty { set(original, of: thread) }
            }
        }
        return body()
    }

    /// A 1024-bit `cpu_set_t` holding `cpu` alone.
    private static func mask(onlyOf cpu: Int) -> [UInt64] {
        var mask = [UInt64](repeating: 0, count: 16)
        mask[cpu / 64] |= 1 << UInt64(cpu % 64)
        return mask
    }

    /// The process's threads (`/proc/self/task`).
    private static func threadIDs() -> [pid_t] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []).compactMap { pid_t($0) }
    }

    /// Pins the calling thread to `cpu` (threads it creates later inherit the mask).
    static func pinCurrentThread(to cpu: Int) {
        guard let setAffinity else { return }
        let rc = mask(onlyOf: cpu).withUnsafeBytes { setAffinity(0, $0.count, $0.baseAddress!) }
        if rc != 0 { Progress.say("warning: cannot pin a thread to CPU \(cpu) (errno \(errno))") }
    }
}
