import CLinuxPoll
import Glibc

/// The file and descriptor calls RunLoopKit makes, each through `systemCall` (errno read
/// at the failure point, `EINTR` retried) and throwing `SystemCallError` named after the
/// call and its path. Calls that cannot fail (`getpid`, `getuid`) are made directly.
package enum Kernel {
    /// `open(2)`; returns the new descriptor.
    package static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(SystemCallError) -> Int32 {
        try systemCall("open(\(path))") { Glibc.open(path, flags, mode) }
    }

    /// `close(2)`, once. Never retried: Linux releases the descriptor even when `close`
    /// reports `EINTR`, so a retry could close a descriptor another thread just opened.
    /// Its error is not reported: the descriptor is gone either way.
    package static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// `eventfd(2)`, close-on-exec; returns the new descriptor.
    package static func eventDescriptor() throws(SystemCallError) -> Int32 {
        try systemCall("eventfd") { eventfd(0, Int32(EFD_CLOEXEC)) }
    }

    /// `read(2)` into `buffer`; returns the bytes read.
    package static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Int {
        try systemCall("read") { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    /// `write(2)` of `bytes`; returns the bytes written.
    package static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemCallError) -> Int {
        try systemCall("write") { Glibc.write(fd, bytes.baseAddress, bytes.count) }
    }

    /// `pread(2)` into `buffer` from `offset`; returns the bytes read.
    package static func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(SystemCallError) -> Int {
        try systemCall("pread") { Glibc.pread(fd, buffer.baseAddress, buffer.count, offset) }
    }

    /// `pwrite(2)` of `bytes` at `offset`; returns the bytes written.
    package static func write(_ fd: Int32, _ bytes: [UInt8], at offset: Int) throws(SystemCallError) -> Int {
        try systemCall("pwrite") { bytes.withUnsafeBytes { Glibc.pwrite(fd, $0.baseAddress, $0.count, offset) } }
    }

    /// Replaces a file's contents with `bytes` (`ftruncate(2)`, then `pwrite(2)` at 0).
    package static func overwrite(_ fd: Int32, with bytes: [UInt8]) throws(SystemCallError) {
        try setSize(fd, to: 0)
        _ = try write(fd, bytes, at: 0)
    }

    /// `unlink(2)`.
    package static func unlink(_ path: String) throws(SystemCallError) {
        try systemCall("unlink(\(path))") { Glibc.unlink(path) }
    }

    /// `fchmod(2)`.
    package static func changeMode(_ fd: Int32, _ mode: mode_t) throws(SystemCallError) {
        try systemCall("fchmod") { Glibc.fchmod(fd, mode) }
    }

    /// `fsync(2)`: the file's data and metadata on the disk before it returns.
    package static func synchronize(_ fd: Int32) throws(SystemCallError) {
        try systemCall("fsync") { Glibc.fsync(fd) }
    }

    /// `rename(2)`: `path` takes `from`'s place at once, replacing whatever was there.
    package static func rename(_ from: String, to path: String) throws(SystemCallError) {
        try systemCall("rename(\(from), \(path))") { Glibc.rename(from, path) }
    }

    /// `link(2)`: a new name for `from`'s file; fails with `fileExists` (`EEXIST`) if
    /// anything is at `path`, so that it never replaces a file.
    package static func link(_ from: String, to path: String) throws(SystemCallError) {
        try systemCall("link(\(from), \(path))") { Glibc.link(from, path) }
    }

    /// Writes all of `bytes`, in as many `write(2)` calls as it takes.
    package static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(SystemCallError) {
        var offset = 0
        while offset < bytes.count {
            let start = offset
            offset += try bytes.withUnsafeBufferPointer { buffer throws(SystemCallError) in
                try write(fd, UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer)[start...]))
            }
        }
    }

    /// `fsync(2)` of the directory at `path` (opened `O_RDONLY | O_DIRECTORY`): the names
    /// made, removed or renamed in it on the disk before it returns. A file system that
    /// cannot sync a directory (`EINVAL`: some FUSE ones) has nothing more to do.
    package static func synchronizeDirectory(_ path: String) throws(SystemCallError) {
        let fd = try open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(fd) }
        do {
            try synchronize(fd)
        } catch where error.code == .invalidArgument {}
    }

    /// Sleeps until `deadline` on the monotonic clock (`clock_nanosleep(2)`, absolute), a
    /// signal's interruption included.
    package static func sleep(until deadline: Deadline) {
        var spec = timespec(tv_sec: Int(deadline.rawValue / 1_000_000_000), tv_nsec: Int(deadline.rawValue % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &spec, nil) == EINTR {}
    }

    /// `chmod(2)`.
    package static func chmod(_ path: String, _ mode: mode_t) throws(SystemCallError) {
        try systemCall("chmod(\(path))") { Glibc.chmod(path, mode) }
    }

    /// `mkdir(2)`; false if something already exists at `path` (`EEXIST`).
    @discardableResult
    package static func makeDirectory(_ path: String, _ mode: mode_t) throws(SystemCallError) -> Bool {
        do {
            try systemCall("mkdir(\(path))") { Glibc.mkdir(path, mode) }
            return true
        } catch where error.code == .fileExists {
            return false
        }
    }

    /// `lstat(2)`: what `path` names, not following a symbolic link.
    package static func linkStatus(_ path: String) throws(SystemCallError) -> stat {
        var info = stat()
        try systemCall("lstat(\(path))") { Glibc.lstat(path, &info) }
        return info
    }

    /// `stat(2)` (as `fstatat(2)` from the working directory).
    package static func status(_ path: String) throws(SystemCallError) -> stat {
        var info = stat()
        try systemCall("stat(\(path))") { fstatat(AT_FDCWD, path, &info, 0) }
        return info
    }

    /// `fstat(2)`.
    package static func status(_ fd: Int32) throws(SystemCallError) -> stat {
        var info = stat()
        try systemCall("fstat") { Glibc.fstat(fd, &info) }
        return info
    }

    /// Whether anything exists at `path` (`access(2)` with `F_OK`).
    package static func exists(_ path: String) -> Bool {
        (try? systemCall("access(\(path))") { Glibc.access(path, F_OK) }) != nil
    }

    /// The names in a directory, `.` and `..` included (`opendir(3)`, `readdir(3)`).
    package static func directoryEntries(_ path: String) throws(SystemCallError) -> [String] {
        guard let stream = opendir(path) else { throw SystemCallError(call: "opendir(\(path))", errno: errno) }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            // The name read where it lies, up to its NUL: an entry is only as long as its
            // name (`d_reclen`), so copying the whole 256-byte `d_name` field reads past the
            // last entry of readdir's buffer (AddressSanitizer caught it in a large directory).
            let name = UnsafeRawPointer(entry) + MemoryLayout<dirent>.offset(of: \dirent.d_name)!
            names.append(String(cString: name.assumingMemoryBound(to: CChar.self)))
        }
        return names
    }

    /// `inotify_init1(2)`, non-blocking and close-on-exec; returns the new descriptor.
    package static func inotifyDescriptor() throws(SystemCallError) -> Int32 {
        try systemCall("inotify_init1") { inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) }
    }

    /// `inotify_add_watch(2)` of `path` for the events in `mask`; returns the watch's number.
    package static func watchFile(_ inotify: Int32, _ path: String, mask: UInt32) throws(SystemCallError) -> Int32 {
        try systemCall("inotify_add_watch(\(path))") { inotify_add_watch(inotify, path, mask) }
    }

    /// `pidfd_open(2)`: a descriptor that refers to process `pid` (the process, not its
    /// number, from then on) and becomes readable when it ends.
    package static func processDescriptor(_ pid: pid_t) throws(SystemCallError) -> Int32 {
        try systemCall("pidfd_open(\(pid))") { clinux_pidfd_open(pid) }
    }

    /// Takes an exclusive open-file-description lock on the whole file (`fcntl(2)`,
    /// `F_OFD_SETLK`); false if another open file description holds one.
    package static func lockExclusively(_ fd: Int32) throws(SystemCallError) -> Bool {
        do {
            try systemCall("fcntl(F_OFD_SETLK)") { clinux_ofd_lock(fd, 1, 0, nil) }
            return true
        } catch where error.code == .again || error.code == .permissionDenied {
            return false
        }
    }

    /// Whether another open file description holds an exclusive lock on the file
    /// (`fcntl(2)`, `F_OFD_GETLK`), without taking it.
    package static func isLockedByAnother(_ fd: Int32) throws(SystemCallError) -> Bool {
        var held: Int32 = 0
        try systemCall("fcntl(F_OFD_GETLK)") { clinux_ofd_lock(fd, 1, 1, &held) }
        return held != 0
    }

    /// The calling thread's kernel id (`gettid(2)`, which cannot fail): the process's id on
    /// its main thread, and what a robust lock's word holds.
    package static func threadID() -> pid_t { clinux_gettid() }

    /// Sets the calling thread's timer slack (`prctl(PR_SET_TIMERSLACK)`): how much later
    /// than asked the kernel may end its timed sleeps, to batch wake-ups (50 µs by default).
    package static func setTimerSlack(_ slack: Duration) throws(SystemCallError) {
        _ = try systemCall("prctl(PR_SET_TIMERSLACK)") { clinux_set_timer_slack(UInt(clamping: slack.totalNanoseconds)) }
    }
}
