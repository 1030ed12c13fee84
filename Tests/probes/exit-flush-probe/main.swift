// A probe for ExitFlushTests: a process that sends to another process's port and then
// ends, in one of the ways a program ends normally. It prints `sent <count>` once every
// send returned, then ends; the test, which owns the receiving port, counts what arrives.
//
//   exit-flush-probe <port name or ipc:// / tcp:// address> <count> <ending> [options]
//
// Endings:
//   exit         calls exit(0)
//   return       returns from main
//   signal       runs MainLoop.run(stoppingOn: [.interrupt, .terminate]), printing
//                `running` once it watches the signals, and returns from main once a
//                signal stopped it
//   thread-exit  sends from a worker thread that then exits; main joins it and calls
//                _exit(0), which runs no exit handler: only the thread's exit flushes
// Options:
//   --size <bytes>      each message's data component (at least 8; default 1024)
//   --limit-ms <ms>     RemotePort.exitFlushLimit
// Each message's id is 1, its data the sequence number (0, 1, …) as a little-endian
// UInt64 followed by zeros. RunLoopKit's log is printed on stderr as swift-log prints it by
// default (`.info` and above), and on stdout from `.trace` (the exit flush's "exit flush
// awaits the receivers' read"). Once every send returned and before it ends, it
// prints `ending <schedule>`; once every flush is done (an exit handler registered before
// RunLoopKit's, so run after it), `end <schedule>`, then `ended`. A schedule is the
// monotonic clock, the machine's stolen time and each thread's CPU time and run-queue
// wait (see `schedule()`). Exit status 0, or 1 with the error on stderr.
import Glibc
import Logging
import RunLoopKit

/// Writes `line` to standard error (or `descriptor`), unbuffered.
func say(_ line: String, to descriptor: Int32 = 2) {
    var text = line + "\n"
    text.withUTF8 { _ = write(descriptor, $0.baseAddress, $0.count) }
}

/// The contents of the file at `path` (of /proc: read until its end), or "".
func contents(of path: String) -> String {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return "" }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count <= 0 { break }
        bytes += buffer[0..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// `<monotonic ns> steal=<ticks> <tid>=<cpu ns>+<wait ns> …`: CLOCK_MONOTONIC now (read
/// first), the machine's stolen time (/proc/stat, in clock ticks) and, for each thread of
/// this process, its CPU time and run-queue wait so far (/proc/self/task/<tid>/schedstat).
func schedule() -> String {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    var line = "\(Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec))"
    let cpu = contents(of: "/proc/stat").split(separator: "\n").first?.split(separator: " ") ?? []
    line += " steal=\(cpu.count > 8 ? cpu[8] : "0")"
    if let directory = opendir("/proc/self/task") {
        while let entry = readdir(directory) {
            let tid = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard Int32(tid) != nil else { continue }
            let fields = contents(of: "/proc/self/task/\(tid)/schedstat").split(separator: " ")
            if fields.count >= 2 { line += " \(tid)=\(fields[0])+\(fields[1])" }
        }
        closedir(directory)
    }
    return line
}

/// What the command line asked for.
struct Probe: Sendable {
    var target = ""
    var count = 0
    var ending = ""
    var size = 1024

    static func parse(_ arguments: [String]) -> Probe {
        var probe = Probe()
        guard arguments.count >= 3, let count = Int(arguments[1]) else {
            say("usage: exit-flush-probe <port> <count> <exit|return|signal|thread-exit> [--size n] [--limit-ms n]")
            exit(2)
        }
        probe.target = arguments[0]
        probe.count = count
        probe.ending = arguments[2]
        var options = arguments.dropFirst(3).makeIterator()
        while let option = options.next() {
            guard let value = options.next().flatMap(Int.init) else { say("\(option) needs a number"); exit(2) }
            switch option {
            case "--size": probe.size = max(8, value)
            case "--limit-ms": RemotePort.exitFlushLimit = .milliseconds(value)
            default: say("unknown option \(option)"); exit(2)
            }
        }
        return probe
    }

    func destination() throws -> RemotePort {
        if target.hasPrefix("ipc://") || target.hasPrefix("tcp://") { return RemotePort(try PortAddress(validating: target)) }
        return try RemotePort(named: target)
    }

    /// Sends the `count` messages and prints `sent <count>`; exits with status 1 on the first failure.
    func sendAll() {
        do {
            let port = try destination()
            for sequence in 0..<count {
                var data = [UInt8](repeating: 0, count: size)
                withUnsafeBytes(of: UInt64(sequence).littleEndian) { data.replaceSubrange(0..<8, with: $0) }
                try port.send(LoopMessage(id: 1, components: [.data(data)]))
            }
        } catch {
            say("send failed: \(error)")
            exit(1)
        }
        say("sent \(count)", to: 1)
    }
}

LoggingSystem.bootstrap { label in
    var traced = StreamLogHandler.standardOutput(label: label)
    traced.logLevel = .trace
    return MultiplexLogHandler([StreamLogHandler.standardError(label: label), traced])
}
atexit {
    say("end \(schedule())", to: 1)
    say("ended", to: 1)
}

let probe = Probe.parse(Array(CommandLine.arguments.dropFirst()))
switch probe.ending {
case "exit":
    probe.sendAll()
    say("ending \(schedule())", to: 1)
    exit(0)
case "return":
    probe.sendAll()
    say("ending \(schedule())", to: 1)
case "signal":
    probe.sendAll()
    MainLoop.perform { say("running", to: 1) } // once the run watches the signals
    let signal = try MainLoop.run(stoppingOn: [.interrupt, .terminate])
    say("stopped by \(signal.map { "\($0)" } ?? "stop()")", to: 1)
    say("ending \(schedule())", to: 1)
case "thread-exit":
    let worker = try WorkerThread(name: "sender")
    try worker.performAndWait { probe.sendAll() }
    say("ending \(schedule())", to: 1)
    worker.stop()
    say("end \(schedule())", to: 1)
    say("ended", to: 1)
    _exit(0)
default:
    say("unknown ending \(probe.ending)")
    exit(2)
}
