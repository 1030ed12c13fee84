import CLinuxPoll
import Foundation
import Glibc

/// What the operating system says about this process and its threads.
enum System {
    /// CPU time (user + system) of the calling thread, in nanoseconds (`RUSAGE_THREAD`).
    static func threadCPUTime() -> UInt64 {
        var usage = rusage()
        getrusage(__rusage_who_t(1), &usage) // RUSAGE_THREAD
        func ns(_ time: timeval) -> UInt64 { UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_usec) * 1000 }
        return ns(usage.ru_utime) + ns(usage.ru_stime)
    }

    /// CPU time (user + system) of the whole process, in nanoseconds (`CLOCK_PROCESS_CPUTIME_ID`).
    static func processCPUTime() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// How many descriptors the process has open (the entries of /proc/self/fd, less the
    /// one the listing itself opens).
    static func openDescriptors() -> Int {
        guard let directory = opendir("/proc/self/fd") else { return -1 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { count += 1 }
        }
        return count - 1
    }

    /// The resident set size of the process, in bytes (`VmRSS` in /proc/self/status).
    static func residentBytes() -> UInt64 {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let digits = line.dropFirst(6).filter(\.isNumber)
            return (UInt64(String(digits)) ?? 0) * 1024 // kB
        }
        return 0
    }

    /// How many established IPv4 tcp connections have `localPort` as their local port
    /// (those a socket listening on it accepted), from /proc/self/net/tcp.
    static func establishedTCPConnections(localPort: Int) -> Int {
        guard let table = wholeFile("/proc/self/net/tcp") else { return 0 }
        // "sl local_address rem_address st …", addresses as hex "0100007F:A1B2"; state 01 is ESTABLISHED.
        return table.split(separator: "\n").dropFirst().count { line in
            let fields = line.split(separator: " ")
            guard fields.count > 3, let colon = fields[1].lastIndex(of: ":") else { return false }
            return fields[3] == "01" && Int(fields[1][colon...].dropFirst(), radix: 16) == localPort
        }
    }

    /// A file read to its end. (`String(contentsOfFile:)` reads a /proc file of size 0 in
    /// one `read`, which the kernel ends at a page: a long /proc/net/tcp comes back cut.)
    static func wholeFile(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count == 0 { return String(decoding: bytes, as: UTF8.self) }
            if count < 0 {
                guard errno == EINTR else { return nil }
                continue
            }
            bytes += chunk[..<count]
        }
    }

    /// Raises the soft limit on open descriptors to at least `wanted` (up to the hard limit);
    /// returns the soft limit now in force.
    @discardableResult
    static func raiseFileLimit(to wanted: UInt64) -> UInt64 {
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < rlim_t(wanted) {
            limit.rlim_cur = min(rlim_t(wanted), limit.rlim_max)
            setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
            getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        }
        return UInt64(limit.rlim_cur)
    }

    /// The path of this executable, to start it again as a child process.
    static var executablePath: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    static var processorCount: Int { ProcessInfo.processInfo.activeProcessorCount }
}
