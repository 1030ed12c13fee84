// Seed 003's experiment, done right. AFNetworking 2 kept a resident network thread alive
// with an unused NSMachPort and `-[NSRunLoop run]`, which nothing can end: such threads
// cannot be stopped, and creating them in a loop leaks every one (the seed's
// `memoryTest`). Here a resident `WorkerThread`, kept alive by an input source of its own,
// takes work from the main thread; then thousands of workers are created, handed work
// with waitUntilDone and stopped, and the process's threads, open descriptors and
// resident memory are compared before and after. Exits non-zero if any grew beyond noise.
import ArgumentParser
import Foundation
import RunLoopKit

/// What the process holds, from /proc/self.
struct Resources {
    let threads: Int
    let descriptors: Int
    let residentKilobytes: Int

    static func measure() -> Resources {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Int {
            for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
                // "Threads:\t5", "VmRSS:\t   1234 kB"
                return Int(line.dropFirst(name.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "") ?? -1
            }
            return -1
        }
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
        return Resources(threads: field("Threads"), descriptors: descriptors, residentKilobytes: field("VmRSS"))
    }
}

/// The calling thread's system name.
func threadName() -> String {
    ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?").trimmingCharacters(in: .newlines)
}

struct KeepAliveExperiment: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keep-alive",
        abstract: "A resident worker thread, then thousands of start → perform → stop cycles that leak nothing.")

    @Option(help: "How many create → performAndWait → stop cycles.")
    var cycles = 10_000

    @Option(help: "Cycles run before measuring, so that the allocator's and glibc's stack caches settle.")
    var warmUp = 300

    @Option(help: "The resident memory growth allowed, in MB.")
    var residentLimit = 20

    func run() throws {
        // The resident thread (AFNetworking's networkRequestThread), handed work several times.
        let resident = try WorkerThread(name: "AFNetworking")
        for request in 1...3 {
            try resident.perform { print("resident: request \(request) runs on \(threadName())") }
        }
        let answer = try resident.performAndWait { "\(threadName()) answered a waiting caller" }
        print("main: \(answer)")
        try resident.performAndWait { print("resident: done before main goes on") }

        // The seed's memoryTest: threads created in a loop, each handed work and stopped.
        func cycle() throws {
            let worker = try WorkerThread(name: "cycle")
            try worker.performAndWait {}
            worker.stop()
        }
        for _ in 0..<warmUp { try cycle() }
        let before = Resources.measure()
        let start = Date()
        for _ in 0..<cycles { try cycle() }
        let seconds = Date().timeIntervalSince(start)
        let after = Resources.measure()

        print(String(format: "%d cycles in %.2f s (%.0f µs each)", cycles, seconds, seconds * 1e6 / Double(max(cycles, 1))))
        func row(_ what: String, _ before: Int, _ after: Int) {
            let cells = [what.padding(toLength: 20, withPad: " ", startingAt: 0)]
                + [before, after, after - before].map { String($0).leftPadded(to: 9) }
            print(cells.joined())
        }
        print("".padding(toLength: 20, withPad: " ", startingAt: 0) + ["before", "after", "growth"].map { $0.leftPadded(to: 9) }.joined())
        row("threads", before.threads, after.threads)
        row("open descriptors", before.descriptors, after.descriptors)
        row("resident memory kB", before.residentKilobytes, after.residentKilobytes)

        // The main thread's loop, run as a tool's: the resident thread says when the program is done.
        try resident.perform {
            print("resident: all done, stopping the main loop")
            MainLoop.stop()
        }
        MainLoop.run()
        resident.stop()
        print("main: resident thread stopped and joined (\(resident.state))")

        var leaks: [String] = []
        if before.threads <= 0 || before.descriptors <= 0 || before.residentKilobytes <= 0 {
            leaks.append("could not read /proc/self")
        }
        if after.threads > before.threads { leaks.append("threads grew by \(after.threads - before.threads)") }
        if after.descriptors > before.descriptors {
            leaks.append("descriptors grew by \(after.descriptors - before.descriptors)")
        }
        if after.residentKilobytes - before.residentKilobytes > residentLimit * 1024 {
            leaks.append("resident memory grew by more than \(residentLimit) MB")
        }
        guard leaks.isEmpty else {
            print("LEAK: " + leaks.joined(separator: "; "))
            throw ExitCode.failure
        }
        print("no leak: no thread or descriptor outlived its worker, resident memory within \(residentLimit) MB")
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        String(repeating: " ", count: max(0, width - count)) + self
    }
}

KeepAliveExperiment.main()
