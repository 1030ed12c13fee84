import Foundation
import Glibc
@testable import RunLoopCore
@testable import RunLoopKit
@testable import RunLoopSystem
@testable import RunLoopWire
@testable import RunLoopZMQ

/// The process's threads, open descriptors and resident memory, from `/proc/self`.
struct ProcessResources: CustomStringConvertible {
    let threads: Int
    let descriptors: Int
    let residentKilobytes: Int

    static func measure() -> ProcessResources {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Int {
            for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
                // "Threads:\t5", "VmRSS:\t   1234 kB"
                return Int(line.dropFirst(name.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "") ?? -1
            }
            return -1
        }
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
        return ProcessResources(threads: field("Threads"), descriptors: descriptors, residentKilobytes: field("VmRSS"))
    }

    var description: String {
        "\(threads) threads, \(descriptors) descriptors, \(residentKilobytes / 1024) MB resident"
    }
}

/// The names of the process's live threads (`/proc/self/task/*/comm`).
func liveThreadNames() -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { task in
        (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .newlines)
    }
}

/// The calling thread's system name.
func currentThreadName() -> String {
    ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "")
        .trimmingCharacters(in: .newlines)
}

/// Whether a sanitizer's runtime is loaded: its allocator (ASan's quarantine of freed
/// memory) and per-thread state make resident memory no measure of leaks.
let runningUnderSanitizer = ["__asan_init", "__tsan_init"].contains { (name: String) in dlsym(nil, name) != nil }

/// The process's open descriptors once they have come down to at most `limit`, or the
/// count after `within` if they never do. libzmq closes a socket's descriptors on its
/// reaper thread, a moment after the socket is closed, so a count right after the
/// sockets' owners went can still include them: this waits for what the kernel says.
func openDescriptors(settlingAtMost limit: Int, within: Duration = .seconds(10)) -> Int {
    settled(atMost: limit, within: within) { ProcessResources.measure().descriptors }
}

/// The process's threads once they have come down to at most `limit` (or the count after
/// `within`): a joined thread is still listed in `/proc` until the kernel has finished
/// its exit, a moment after `pthread_join` returned.
func liveThreads(settlingAtMost limit: Int, within: Duration = .seconds(10)) -> Int {
    settled(atMost: limit, within: within) { ProcessResources.measure().threads }
}

/// Reads `count` until it is at most `limit` or `within` has passed, re-reading what the
/// kernel says every 10 ms.
private func settled(atMost limit: Int, within: Duration, _ count: () -> Int) -> Int {
    let deadline = Deadline.after(within)
    var value = count()
    while value > limit && Deadline.now() < deadline {
        var nap = timespec(tv_sec: 0, tv_nsec: 10_000_000)
        nanosleep(&nap, nil)
        value = count()
    }
    return value
}

/// The CPU time the whole process (every thread, libzmq's I/O threads included) used so far.
func processCPUTime() -> Duration {
    var now = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now)
    return .seconds(now.tv_sec) + .nanoseconds(now.tv_nsec)
}
