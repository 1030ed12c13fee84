import Foundation
import Glibc
import RunLoopSystem

/// The process's threads, open descriptors and resident memory, from `/proc/self`.
package struct ProcessResources: CustomStringConvertible {
    package let threads: Int
    package let descriptors: Int
    package let residentKilobytes: Int

    package static func measure() -> ProcessResources {
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

    package var description: String {
        "\(threads) threads, \(descriptors) descriptors, \(residentKilobytes / 1024) MB resident"
    }
}

/// The names of the process's live threads (`/proc/self/task/*/comm`). A thread that is
/// exiting is not live: `pthread_join` returns once the kernel has cleared the thread's
/// id, while `/proc` still lists the task until its exit is finished; from the start of
/// that exit its flags carry `PF_EXITING`.
package func liveThreadNames() -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { task in
        guard !isExiting(task: task) else { return nil }
        return (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .newlines)
    }
}

/// Whether the task's flags (`/proc/self/task/TID/stat`, the ninth field) have
/// `PF_EXITING`; a task gone meanwhile counts as exiting.
private func isExiting(task: String) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8) else { return true }
    // The name, the second field, is in parentheses and may hold spaces and parentheses.
    guard let nameEnd = stat.lastIndex(of: ")") else { return false }
    let fields = stat[stat.index(after: nameEnd)...].split(separator: " ")
    // After the name: state, ppid, pgrp, session, tty_nr, tpgid, flags.
    guard fields.count > 6, let flags = UInt64(fields[6]) else { return false }
    let exiting: UInt64 = 0x4 // PF_EXITING
    return flags & exiting != 0
}

/// The calling thread's system name.
package func currentThreadName() -> String {
    ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "")
        .trimmingCharacters(in: .newlines)
}

/// Whether a sanitizer's runtime is loaded: its allocator (ASan's quarantine of freed
/// memory) and per-thread state make resident memory no measure of leaks.
package let runningUnderSanitizer = ["__asan_init", "__tsan_init"].contains { (name: String) in dlsym(nil, name) != nil }

/// Whether this process runs under ThreadSanitizer, which runs no signal handler in a child
/// forked from a process with threads (it turns its interceptors off there).
package let runningUnderThreadSanitizer = dlsym(nil, "__tsan_init") != nil

/// The process's open descriptors once they have come down to at most `limit`, or the
/// count after `within` if they never do. libzmq closes a socket's descriptors on its
/// reaper thread, a moment after the socket is closed, so a count right after the
/// sockets' owners went can still include them: this waits for what the kernel says.
package func openDescriptors(settlingAtMost limit: Int, within: Duration = .seconds(10)) -> Int {
    settled(atMost: limit, within: within) { ProcessResources.measure().descriptors }
}

/// What each open descriptor is (`/proc/self/fd`), by number: "eventfd", "eventpoll",
/// "timerfd", "pidfd", "signalfd", "pipe", a unix socket with its path, another socket,
/// or a file's path. A descriptor count that did not settle is explained by
/// the difference between two of these.
package func descriptorInventory() -> [Int32: String] {
    let unixPaths = unixSocketPaths()
    var inventory: [Int32: String] = [:]
    for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
        guard let number = Int32(entry),
              let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)") else { continue }
        if target.hasPrefix("anon_inode:") {
            inventory[number] = String(target.dropFirst("anon_inode:".count)).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        } else if target.hasPrefix("socket:[") {
            let inode = String(target.dropFirst("socket:[".count).dropLast())
            inventory[number] = unixPaths[inode].map { $0.isEmpty ? "unix (unnamed)" : "unix \($0)" } ?? "socket (not unix)"
        } else if target.hasPrefix("pipe:") {
            inventory[number] = "pipe"
        } else {
            inventory[number] = target
        }
    }
    return inventory
}

/// The descriptors in `after` that are not in `before`, counted by kind, most first:
/// "12 × eventfd, 4 × unix /run/…/port.sock".
package func describeNewDescriptors(before: [Int32: String], after: [Int32: String]) -> String {
    var kinds: [String: Int] = [:]
    for (number, kind) in after where before[number] != kind { kinds[kind, default: 0] += 1 }
    return kinds.sorted { $0.value > $1.value }.map { "\($0.value) × \($0.key)" }.joined(separator: ", ")
}

/// Unix sockets by inode, with their path ("" for an unnamed one), from `/proc/net/unix`.
private func unixSocketPaths() -> [String: String] {
    var paths: [String: String] = [:]
    let table = (try? String(contentsOfFile: "/proc/net/unix", encoding: .utf8)) ?? ""
    for line in table.split(separator: "\n").dropFirst() {
        // Num RefCount Protocol Flags Type St Inode [Path]
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 7 else { continue }
        paths[String(fields[6])] = fields.count > 7 ? String(fields[7]) : ""
    }
    return paths
}

/// The process's threads once they have come down to at most `limit` (or the count after
/// `within`): a joined thread is still listed in `/proc` until the kernel has finished
/// its exit, a moment after `pthread_join` returned.
package func liveThreads(settlingAtMost limit: Int, within: Duration = .seconds(10)) -> Int {
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

/// The CPU time the threads `tids`, and those whose name starts with `namePrefix`, used so
/// far: the kernel's own count per thread (`/proc/self/task/TID/schedstat`, nanoseconds),
/// for a measure that other threads of the test process cannot disturb.
package func threadsCPUTime(_ tids: Set<Int32>, namedWith namePrefix: String) -> Duration {
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return .zero }
    var total: Int64 = 0
    for task in tasks {
        guard let tid = Int32(task) else { continue }
        let name = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? ""
        guard tids.contains(tid) || name.hasPrefix(namePrefix) else { continue }
        let stat = (try? String(contentsOfFile: "/proc/self/task/\(task)/schedstat", encoding: .utf8)) ?? ""
        total += stat.split(separator: " ").first.flatMap { Int64($0) } ?? 0
    }
    return .nanoseconds(total)
}

/// The CPU time the whole process (every thread, libzmq's I/O threads included) used so far.
package func processCPUTime() -> Duration {
    var now = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now)
    return .seconds(now.tv_sec) + .nanoseconds(now.tv_nsec)
}

/// CPU time (user + system) of the calling thread, from `getrusage(RUSAGE_THREAD)`.
package func threadCPUTime() -> Duration {
    var usage = rusage()
    getrusage(__rusage_who_t(1), &usage) // 1 = RUSAGE_THREAD, hidden behind _GNU_SOURCE
    let micros = (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1_000_000
        + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
    return .microseconds(micros)
}

/// The memory the process holds for what it allocated and has not freed: under
/// AddressSanitizer or ThreadSanitizer, the sanitizer allocator's count of bytes handed out
/// (`__sanitizer_get_current_allocated_bytes`), because its quarantine keeps what was freed
/// resident for a while; otherwise the resident memory, which is what an unfreed buffer
/// adds once written.
package func heapBytesInUse() -> Int {
    if let counter = sanitizerAllocatedBytes { return counter() }
    return ProcessResources.measure().residentKilobytes * 1024
}

/// The sanitizer runtime's count of allocated bytes, if one is loaded.
private let sanitizerAllocatedBytes: (@convention(c) () -> Int)? = {
    guard let symbol = dlsym(nil, "__sanitizer_get_current_allocated_bytes") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) () -> Int).self)
}()
