import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
import CLinuxPoll
import Glibc

/// The lock file that makes a port name unique across processes: the owner holds an
/// exclusive open-file-description lock (`F_OFD_SETLK`) on `<name>.lock` for as long as
/// its port lives, and others test it (`F_OFD_GETLK`) without ever taking it.
///
/// The kernel drops the lock when the owner dies, so a dead owner's name can be taken
/// again, and a live owner's never. After locking, the holder checks that the path still
/// names the file it locked: if a departing owner unlinked it meanwhile, it tries again.
final class NameLock {
    let path: String
    private let fd: Int32

    /// Takes the lock for `name`, writing our pid into it; `nameInUse` if a live process holds it.
    init(name: String, directory: String) throws(PortError) {
        path = "\(directory)/\(name).lock"
        var attempts = 0
        while true {
            attempts += 1
            let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else { throw .system(SystemCallError(call: "open(\(path))", errno: errno)) }
            if clinux_ofd_lock(fd, 1, 0, nil) != 0 {
                let code = errno
                let holder = NameLock.writtenPID(fd)
                close(fd)
                if code == EAGAIN || code == EACCES { throw .nameInUse(name, holder: holder) }
                throw .system(SystemCallError(call: "fcntl(F_OFD_SETLK, \(path))", errno: code))
            }
            if NameLock.stillNamesFile(path: path, fd: fd) {
                self.fd = fd
                break
            }
            close(fd) // unlinked by its previous owner between our open and flock
            if attempts > 100 { throw .nameInUse(name, holder: nil) }
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    }

    /// Unlinks the lock file, then releases the lock.
    func release() {
        unlink(path)
        close(fd)
    }

    /// The pid of the live owner of `name`'s lock, or nil when no live process holds it.
    static func liveOwner(name: String, directory: String) -> pid_t? {
        let fd = open("\(directory)/\(name).lock", O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var held: Int32 = 0
        guard clinux_ofd_lock(fd, 1, 1, &held) == 0, held != 0 else { return nil }
        return writtenPID(fd) ?? -1 // -1: alive, pid not yet written
    }

    /// The pid its holder wrote into the lock file open at `fd`, if it has yet.
    private static func writtenPID(_ fd: Int32) -> pid_t? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 31, 0) }
        let digits = buffer.prefix(max(count, 0)).prefix { $0 >= 0x30 && $0 <= 0x39 }
        return pid_t(String(decoding: digits, as: UTF8.self))
    }

    private static func stillNamesFile(path: String, fd: Int32) -> Bool {
        var held = stat()
        var named = stat()
        guard fstat(fd, &held) == 0, stat(path, &named) == 0 else { return false }
        return held.st_dev == named.st_dev && held.st_ino == named.st_ino
    }
}
