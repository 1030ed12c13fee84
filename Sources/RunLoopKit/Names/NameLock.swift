import RunLoopSystem
import Glibc

/// The lock file that makes a port name unique across processes: the owner holds an
/// exclusive open-file-description lock (`F_OFD_SETLK`) on `<name>.lock` for as long as
/// its port lives, and others test it (`F_OFD_GETLK`) without ever taking it.
///
/// The kernel drops the lock when the owner dies, so a dead owner's name can be taken
/// again, and a live owner's never. After locking, the holder checks that the path still
/// names the file it locked: if a departing owner unlinked it meanwhile, it tries again.
/// It empties the file, and writes its pid into it only once its port's socket listens
/// (`announceOwner()`): a held lock with a pid is a port that can be reached.
///
/// A child forked while the lock is held shares its open file description: closing the
/// child's copy of the descriptor (at its exit, `exec` or `release`) leaves the parent's
/// lock in place, since the kernel drops an OFD lock only with the description's last
/// descriptor. But a child that outlives its parent without `exec` keeps the name held.
final class NameLock {
    let path: String
    private let fd: Int32
    /// The process that took the lock: in another (a child it forked), `release` only
    /// closes that process's copy of the descriptor.
    private let processID: pid_t

    /// Takes the lock for `name`, emptying the file (see `announceOwner()`); `nameInUse` if a
    /// live process holds it. A holder whose life page says it died (killed, its lock not yet
    /// freed by the kernel) is waited for, up to `dyingHolderWait`.
    init(name: String, directory: String) throws(PortError) {
        let path = "\(directory)/\(name).lock"
        self.path = path
        processID = getpid()
        var attempts = 0
        while true {
            attempts += 1
            let fd = try asPortError { () throws(SystemCallError) in
                try Kernel.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode: 0o600)
            }
            let locked: Bool
            do {
                locked = try Kernel.lockExclusively(fd)
            } catch {
                Kernel.close(fd)
                throw .system(error)
            }
            guard locked else {
                let holder = NameLock.writtenPID(fd)
                Kernel.close(fd)
                if let holder, NameLock.awaitDyingHolder(holder, lifePath: NameLife.path(besideLock: path)) { continue }
                throw .nameInUse(name, holder: holder)
            }
            if NameLock.stillNamesFile(path: path, fd: fd) {
                self.fd = fd
                break
            }
            Kernel.close(fd) // unlinked by its previous owner between our open and lock
            if attempts > 100 { throw .nameInUse(name, holder: nil) }
        }
        // A dead owner's pid goes at once: until `announceOwner()` the file is empty, so
        // that no watcher takes the previous owner's pid, or the name, for a live port's.
        _ = try? Kernel.overwrite(fd, with: [])
    }

    /// Whether the life page at `lifePath` says that `holder`, which still holds a name's
    /// lock, died holding it: killed, and not yet ended by the kernel, which frees the lock
    /// only then. Such a holder is no live owner: a name it holds is free in a moment.
    static func holderDied(_ holder: pid_t, lifePath: String) -> Bool {
        NameLife.reading(path: lifePath, ownerPID: holder) == .ownerDied
    }

    /// How long a registration waits for a holder its life page says died to end (the kernel
    /// releases the lock only then, after it has unmapped the process: milliseconds for most,
    /// longer for a process of gigabytes), before it gives up with `nameInUse`.
    static let dyingHolderWait = Duration.seconds(1)

    /// Whether `holder`, whose life page says its port's thread died holding the name, has
    /// ended within `dyingHolderWait`, so that its lock is free: a `PortLossSource` tells of
    /// the death from the page before that, and its handler may take the name over.
    private static func awaitDyingHolder(_ holder: pid_t, lifePath: String) -> Bool {
        guard holderDied(holder, lifePath: lifePath) else { return false }
        let pidfd: Int32
        do {
            pidfd = try Kernel.processDescriptor(holder)
        } catch {
            return error.code == .noSuchProcess // reaped already: ended
        }
        defer { Kernel.close(pidfd) }
        return (try? Kernel.waitUntilReadable(pidfd, before: .after(dyingHolderWait))) ?? false
    }

    /// Writes our pid into the lock file: the last step of a registration, once the port's
    /// socket listens, which a `PortNameWatch` takes for the name's appearance. The pid is
    /// also for `nameInUse(holder:)` and the tool's listing: a lock file without it (a port
    /// being registered) still holds the name.
    func announceOwner() {
        // The file is empty since the lock was taken (see init): one write is the whole
        // announcement, one change (`IN_MODIFY`) for a watcher, with no truncation before it.
        _ = try? Kernel.write(fd, Array("\(processID)\n".utf8), at: 0)
    }

    /// Whether the calling process took the lock (it is not a child forked since).
    var tookItInThisProcess: Bool { processID == getpid() }

    /// Unlinks the lock file, then releases the lock. In a forked child, only closes the
    /// child's copy of the descriptor: the parent's lock and file stay.
    func release() {
        if tookItInThisProcess {
            _ = try? Kernel.unlink(path) // already gone: nothing to give back
        }
        Kernel.close(fd)
    }

    /// The pid of the live owner of `name`'s lock, or nil when no live process holds it (no
    /// lock file, nobody holds its lock, or its holder's life page says it died). Throws when
    /// the file cannot be tested (`EMFILE` at the descriptor limit, `EACCES`): that says
    /// nothing of an owner.
    static func liveOwner(name: String, directory: String) throws(SystemCallError) -> pid_t? {
        let fd: Int32
        do {
            fd = try Kernel.open("\(directory)/\(name).lock", O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        } catch where error.code == .fileNotFound {
            return nil
        }
        defer { Kernel.close(fd) }
        guard try Kernel.isLockedByAnother(fd) else { return nil }
        guard let pid = writtenPID(fd) else { return -1 } // alive, pid not yet written
        return holderDied(pid, lifePath: "\(directory)/\(name).life") ? nil : pid
    }

    /// Whether a live process holds the lock file at `path`: false if there is no such file
    /// (its owner gave the name back), nobody holds its lock (its owner died) or its holder's
    /// life page says it died (the kernel has yet to free the lock). Throws when the file
    /// cannot be tested (`EMFILE`, `EACCES`): that says nothing of an owner.
    static func isHeld(path: String) throws(SystemCallError) -> Bool {
        let fd: Int32
        do {
            fd = try Kernel.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        } catch where error.code == .fileNotFound {
            return false
        }
        defer { Kernel.close(fd) }
        guard try Kernel.isLockedByAnother(fd) else { return false }
        guard let pid = writtenPID(fd) else { return true }
        return !holderDied(pid, lifePath: NameLife.path(besideLock: path))
    }

    /// The pid the last owner of `name` wrote into its lock file, read without taking or
    /// testing the lock (a dead owner's, for the tool's listing).
    static func lastOwner(name: String, directory: String) -> pid_t? {
        guard let fd = try? Kernel.open("\(directory)/\(name).lock", O_RDONLY | O_CLOEXEC | O_NOFOLLOW) else { return nil }
        defer { Kernel.close(fd) }
        return writtenPID(fd)
    }

    /// The pid its holder wrote into the lock file open at `fd`, if it has yet.
    static func writtenPID(_ fd: Int32) -> pid_t? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { (try? Kernel.pread(fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[..<31]), at: 0)) ?? 0 }
        let digits = buffer.prefix(count).prefix { $0 >= 0x30 && $0 <= 0x39 }
        return pid_t(String(decoding: digits, as: UTF8.self))
    }

    /// The pid of an owner that announced itself (`announceOwner()`): the file's whole
    /// content, digits and a newline; nil while it is empty or being written.
    static func announcedPID(_ fd: Int32) -> pid_t? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { (try? Kernel.pread(fd, into: $0, at: 0)) ?? 0 }
        guard count >= 2, count < 32, buffer[count - 1] == 0x0A else { return nil }
        let digits = buffer.prefix(count - 1)
        guard digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let pid = pid_t(String(decoding: digits, as: UTF8.self)),
              pid > 0 else { return nil }
        return pid
    }

    private static func stillNamesFile(path: String, fd: Int32) -> Bool {
        guard let held = try? Kernel.status(fd), let named = try? Kernel.status(path) else { return false }
        return held.st_dev == named.st_dev && held.st_ino == named.st_ino
    }
}
