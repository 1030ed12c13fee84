import Foundation
import Glibc
import LatencyStatistics
import RunLoopKit
import Synchronization

/// A name registered in another process → the watcher's `PortNameWatch` handler reporting
/// it appeared, on its loop's thread: the monotonic clock read by the owner right before
/// `LocalPort(name:)`, then in the handler. The floor: a thread blocked in `poll(2)` on an
/// inotify watch of the runtime directory that reads the name's lock file when it changes,
/// until it names its owner (the registration's last step, which the watch waits for too).
/// One owner process (this executable, `--child name-appear-owner`) registers a fresh name
/// for each sample.
enum NameAppearCase {
    static let name = "name-appear"
    static let childRole = "name-appear-owner"

    static func run(_ config: BenchConfig) -> CaseOutcome {
        let owner = NameOwnerProcess()
        defer { owner.finish() }
        let runLoopKit = RunLoopKitNameAppear(owner: owner)
        let distributions = Harness.latencies([runLoopKit, InotifyNameAppear(owner: owner)], rounds: config.quick ? 2 : 4,
                                              batch: config.quick ? 25 : 50, warmUp: 5, only: config.only)
        var outcome = CaseOutcome(name: name, distributions: distributions, chartCaption: "registration in another process → handler")
        outcome.metrics = [
            distributions.metric(name, "us_p50", targets: [.atMostTimes(1.2, peer: "inotify-poll")]) { $0.p50 },
            distributions.metric(name, "us_p99", targets: [.atMost(1000)]) { $0.p99 },
        ]
        outcome.notes = ["\(name): the owner's registration itself (LocalPort(name:)) took \(Format.value(owner.medianRegistration / 1000)) µs "
                         + "(median), included in every figure; the watcher's thread used \(Format.value(runLoopKit.cpuPerAppearance / 1000)) µs "
                         + "of CPU from the command to register to the handler (its loop's passes and the watch's checks), "
                         + "\(Format.value(runLoopKit.cpuPerWatch / 1000)) µs to make a watch and report its first state (thread CPU clock, medians)"]
        return outcome
    }

    /// The owner: reads commands on its standard input. `register NAME` reads the clock,
    /// registers a port as `NAME` and prints the clock reading and the registration's
    /// duration; `drop NAME` invalidates it and prints `dropped`. Exits when its input closes.
    static func serveAsChild() -> Never {
        var ports: [String: LocalPort] = [:]
        print("ready")
        fflush(nil)
        while let line = readLine() {
            let words = line.split(separator: " ").map(String.init)
            guard words.count == 2 else { fatalError("child: unknown command '\(line)'") }
            switch words[0] {
            case "register":
                let start = Clock.now()
                do {
                    ports[words[1]] = try LocalPort(name: words[1])
                } catch {
                    fatalError("child: \(error)")
                }
                print("\(start) \(Clock.now() - start)")
            case "drop":
                ports.removeValue(forKey: words[1])?.invalidate()
                print("dropped")
            default:
                fatalError("child: unknown command '\(line)'")
            }
            fflush(nil)
        }
        exit(0)
    }

    static func freshName() -> String {
        "runloopkit-bench.name-appear.\(getpid()).\(serial.add(1, ordering: .relaxed).newValue)"
    }

    private static let serial = Atomic<Int>(0)
}

/// The owner process, spoken to line by line.
final class NameOwnerProcess: @unchecked Sendable {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var pending = Data()
    private let lock = NSLock()
    private var registrations: [UInt64] = []

    init() {
        process.executableURL = URL(fileURLWithPath: System.executablePath)
        process.arguments = ["--child", NameAppearCase.childRole]
        process.standardInput = input
        process.standardOutput = output
        do {
            try process.run()
        } catch {
            fatalError("cannot start the owner process: \(error)")
        }
        guard readLine() == "ready" else { fatalError("the owner process did not start") }
    }

    /// Sends a command; returns at once.
    func send(_ command: String) {
        input.fileHandleForWriting.write(Data("\(command)\n".utf8))
    }

    /// The owner's next line.
    func readLine() -> String {
        lock.lock()
        defer { lock.unlock() }
        while true {
            if let end = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[pending.startIndex..<end], as: UTF8.self)
                pending = Data(pending[(end + 1)...])
                return line
            }
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { fatalError("the owner process exited") }
            pending.append(chunk)
        }
    }

    /// The clock reading the owner took right before registering (after `register NAME`).
    func registrationStart() -> UInt64 {
        let words = readLine().split(separator: " ")
        guard words.count == 2, let start = UInt64(words[0]), let took = UInt64(words[1]) else {
            fatalError("the owner's registration failed")
        }
        lock.lock()
        registrations.append(took)
        lock.unlock()
        return start
    }

    /// Gives `name` back and waits until it did.
    func drop(_ name: String) {
        send("drop \(name)")
        guard readLine() == "dropped" else { fatalError("the owner did not drop \(name)") }
    }

    /// The median registration time, ns.
    var medianRegistration: Double {
        lock.lock()
        defer { lock.unlock() }
        return median(nanoseconds: registrations)
    }

    func finish() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

final class RunLoopKitNameAppear: LatencyContender {
    let name = "runloopkit"
    private let owner: NameOwnerProcess
    private let driver = CommandThread(cpu: nil)
    private var appearanceCPU: [UInt64] = [], watchCPU: [UInt64] = []

    init(owner: NameOwnerProcess) { self.owner = owner }

    /// The watcher thread's CPU from the command to register to the handler, ns (median).
    var cpuPerAppearance: Double { median(nanoseconds: appearanceCPU) }
    /// The watcher thread's CPU to make a watch, add it and report its first state, ns (median).
    var cpuPerWatch: Double { median(nanoseconds: watchCPU) }

    /// `CLOCK_THREAD_CPUTIME_ID`, ns: exact to the call, where `getrusage` lags the scheduler's accounting.
    private static func threadCPU() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    func measure(_ count: Int) -> LatencyHistogram {
        var recorder = LatencyHistogram()
        for _ in 0..<count {
            let portName = NameAppearCase.freshName()
            let owner = self.owner
            let (appearedAt, made, used) = driver.run { () -> (UInt64, UInt64, UInt64) in
                let loop = ThreadRunLoop.current
                let start = RunLoopKitNameAppear.threadCPU()
                let appearedAt = Confined<UInt64>(0), first = Confined<Bool>(false)
                let watch: PortNameWatch
                do {
                    watch = try PortNameWatch(name: portName) { event in
                        switch event {
                        case .vanished: first.value = true
                        case .appeared: appearedAt.value = Clock.now()
                        }
                    }
                } catch {
                    fatalError("watching \(portName): \(error)")
                }
                loop.add(watch, to: .default)
                while !first.value { _ = loop.run(mode: .default, timeout: .seconds(5), returnAfterSourceHandled: true) }
                let before = RunLoopKitNameAppear.threadCPU()
                owner.send("register \(portName)")
                while appearedAt.value == 0 { _ = loop.run(mode: .default, timeout: .seconds(5), returnAfterSourceHandled: true) }
                let used = RunLoopKitNameAppear.threadCPU() - before
                watch.invalidate()
                return (appearedAt.value, before - start, used)
            }
            let start = owner.registrationStart()
            owner.drop(portName)
            recorder.record(nanoseconds: appearedAt - start)
            watchCPU.append(made)
            appearanceCPU.append(used)
        }
        return recorder
    }

    func finish() { driver.finish() }
}

/// The kernel's floor: `poll(2)` on an inotify watch of the runtime directory, reading the
/// name's lock file at each change until it names its owner.
final class InotifyNameAppear: LatencyContender {
    let name = "inotify-poll"
    private let owner: NameOwnerProcess
    private let driver = CommandThread(cpu: nil)
    private let directory: String

    init(owner: NameOwnerProcess) {
        self.owner = owner
        func variable(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
        directory = variable("RUNLOOPKIT_RUNTIME_DIR") ?? variable("XDG_RUNTIME_DIR").map { "\($0)/runloopkit" }
            ?? "/tmp/runloopkit-\(getuid())"
    }

    func measure(_ count: Int) -> LatencyHistogram {
        var recorder = LatencyHistogram()
        for _ in 0..<count {
            let portName = NameAppearCase.freshName()
            let owner = self.owner, directory = self.directory
            let appearedAt = driver.run { () -> UInt64 in
                let inotify = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
                precondition(inotify >= 0, "inotify_init1: \(errno)")
                defer { close(inotify) }
                precondition(inotify_add_watch(inotify, directory, UInt32(IN_MODIFY)) >= 0, "inotify_add_watch: \(errno)")
                let lockPath = "\(directory)/\(portName).lock"
                var entry = pollfd(fd: inotify, events: Int16(POLLIN), revents: 0)
                var buffer = [UInt8](repeating: 0, count: 4096)
                owner.send("register \(portName)")
                while true {
                    while poll(&entry, 1, -1) != 1 {}
                    while read(inotify, &buffer, buffer.count) > 0 {}
                    let fd = open(lockPath, O_RDONLY | O_CLOEXEC)
                    guard fd >= 0 else { continue }
                    let count = pread(fd, &buffer, 32, 0)
                    close(fd)
                    if count >= 2, buffer[count - 1] == UInt8(ascii: "\n") { return Clock.now() }
                }
            }
            let start = owner.registrationStart()
            owner.drop(portName)
            recorder.record(nanoseconds: appearedAt - start)
        }
        return recorder
    }

    func finish() { driver.finish() }
}
