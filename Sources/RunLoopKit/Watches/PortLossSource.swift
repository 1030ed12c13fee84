import RunLoopCore
import RunLoopSystem
import Glibc

/// Why a watched port is gone (what a `PortLossSource` tells its handler).
public enum PortLoss: Sendable, Equatable, CustomStringConvertible {
    /// The process that owned the port ended (killed, crashed or exited) while holding it.
    case ownerDied
    /// The owner gave the port's name back: it invalidated the port (or its thread or
    /// process ended normally, which withdraws its names first).
    case portInvalidated

    public var description: String {
        switch self {
        case .ownerDied: "its owner process died"
        case .portInvalidated: "it was invalidated"
        }
    }
}

/// A remote port's end as a run-loop source (Mach's dead-name notification,
/// `CFMessagePortSetInvalidationCallBack` for a remote port): its handler is called once,
/// on the loop's thread, when the port's owner process dies or the owner invalidates the
/// port, and says which (`PortLoss`). The source is then invalid.
///
///     let server = try RemotePort(named: "image-server")
///     let loss = try PortLossSource(watching: server) { why in print("server gone: \(why)") }
///     ThreadRunLoop.current.add(loss, to: .default)
///
/// It watches a named port of another process on this host (its ipc address, as
/// `RemotePort(named:)` gives it). The owner's death is seen first on the name's life page
/// (`<name>.life`): the port's owner thread holds a robust lock there, which the kernel
/// releases, marked owner-died, as soon as that thread is killed, before it tears the
/// process down; a RunLoopKit thread sleeps on the lock's word (one thread for up to 127
/// watches, and only while there are some) and signals the source. A pidfd of the owner
/// process (`pidfd_open`) backs it: readable once the process has ended, which for a
/// process of Swift's size is a millisecond or more later (`runloopkit-bench --case
/// peer-death`). The handler may register the port's name at once: the dying owner holds
/// the name's lock until the kernel has ended it, and a registration waits for that (up to
/// a second) when the owner's life page says it died. The owner marks the page withdrawn
/// before it gives the name back, which tells the invalidation. An owner without a life
/// page (a foreign peer, an older RunLoopKit) is watched through the pidfd and an inotify
/// watch of the name's lock file, which the owner unlinks when it gives the name back.
/// Nothing polls: the source holds the pidfd (and the inotify descriptor), costs nothing
/// while idle, and closes them when it fires (after its handler returns) or is
/// invalidated. Closing an inotify descriptor waits for the kernel's SRCU grace period:
/// that close can hold the loop's thread for some milliseconds.
///
/// The owner is proven, not taken on trust: the pid comes from the name's lock file, and
/// the source pins that process (a pidfd refers to the process, never to a later one with
/// the same number) and only then checks that the name's lock is still held and the file
/// still names that pid. A live lock is held by a live owner, so the pid cannot be a stale
/// one from a dead owner. The life page is taken only if it names that pid, and is a file
/// of this user's in the runtime directory (mode 0700): only the kernel, the owner, or
/// another process of the same user (which could as well kill the owner) can mark it.
///
/// Like every source it lives in modes: the handler runs only while its loop runs in one of
/// the modes it was added to; a loss seen while the loop runs in another mode waits for one
/// of them. Once added to a loop, the loop keeps the source until it fires or is
/// invalidated; a source on no loop stops watching when released.
///
/// Thread safety: `invalidate()` and `isValid` from any thread; the handler runs on the
/// loop's thread.
public final class PortLossSource: @unchecked Sendable {
    /// The port watched.
    public let port: RemotePort
    /// The pid of the port's owner process when the source was made.
    public let ownerPID: pid_t

    /// The owner's pidfd: readable when it ends.
    private let death: DescriptorSource
    /// How the owner's withdrawal (and, early, its death) is seen.
    private let withdrawal: Withdrawal
    private let lockPath: String
    /// Loop thread only (the handler's); released once told.
    private var handler: ((PortLoss) -> Void)?

    private enum Withdrawal {
        /// The owner's life page, on which the life waiter sleeps and signals `told`.
        case lifePage(LifeWatch, told: InputSource)
        /// For an owner without a life page (or where no waiter can run): an inotify watch of
        /// the name's lock file, and that file's identity, to tell its unlinking from a change
        /// of its attributes.
        case lockFile(DescriptorSource, device: UInt64, inode: UInt64)
    }

    /// Watches `port`, a named port of another process on this host. Throws `remoteInvalid`
    /// if the port is already gone (no live owner holds its name: nothing would ever fire),
    /// `invalidAddress` for a port that is not a named port reached over ipc (an in-process
    /// address, tcp), and `.system` when a descriptor cannot be had (`EMFILE`).
    public init(watching port: RemotePort, handler: @escaping (PortLoss) -> Void) throws(PortError) {
        let address = port.address.rawValue
        guard address.hasPrefix("ipc://"), address.hasSuffix(".sock") else {
            throw .invalidAddress("\(address): only a named port of this host (ipc) can be watched")
        }
        let lockPath = String(address.dropFirst("ipc://".count).dropLast(".sock".count)) + ".lock"
        self.port = port
        self.lockPath = lockPath
        self.handler = handler
        let box = PortLossBox()
        var pinned = try PortLossSource.pinOwner(lockPath: lockPath, inotify: nil, address: port.address)
        var chosen: Withdrawal?
        // The page is taken only if it names the pinned owner; a withdrawal since it was made
        // is marked in it, so that nothing between the pinning and the watch is missed.
        if LifeWaiter.isAvailable, let page = NameLife.watch(path: NameLife.path(besideLock: lockPath), ownerPID: pinned.pid) {
            let told = InputSource { box.source?.lifeEvent() }
            let watch = LifeWatch(page: page, told: told)
            do {
                try LifeWaiter.shared.add(watch)
                chosen = .lifePage(watch, told: told)
            } catch {
                page.unmap() // no thread for it: the lock file's watch instead
            }
        }
        if chosen == nil {
            Kernel.close(pinned.pidfd)
            let inotify = try asPortError { () throws(SystemCallError) in try Kernel.inotifyDescriptor() }
            do {
                pinned = try PortLossSource.pinOwner(lockPath: lockPath, inotify: inotify, address: port.address)
            } catch {
                Kernel.close(inotify)
                throw error
            }
            let watch = DescriptorSource(descriptor: inotify, watching: .readable, ownership: .owned) { event in
                box.source?.withdrawalEvent(event)
            }
            chosen = .lockFile(watch, device: UInt64(pinned.status.st_dev), inode: UInt64(pinned.status.st_ino))
        }
        withdrawal = chosen!
        ownerPID = pinned.pid
        death = DescriptorSource(descriptor: pinned.pidfd, watching: .readable, ownership: .owned) { event in
            box.source?.deathEvent(event)
        }
        box.source = self
        death.wrapper = self
        if case .lockFile(let watch, _, _) = withdrawal { watch.wrapper = self }
    }

    deinit { invalidate() }

    /// Whether it still watches (false once it fired or was invalidated). Any thread.
    public var isValid: Bool {
        switch withdrawal {
        case .lifePage(_, let told): death.isValid && told.isValid
        case .lockFile(let watch, _, _): death.isValid && watch.isValid
        }
    }

    /// Stops watching, without calling the handler; its descriptors are closed (on its loop's
    /// thread, at its next pass, if it is on a loop). Any thread.
    public func invalidate() {
        death.invalidate()
        switch withdrawal {
        case .lifePage(let watch, let told):
            told.invalidate()
            watch.cancel()
        case .lockFile(let watch, _, _):
            watch.invalidate()
        }
    }

    /// Opens the name's lock file, watches its inode (with `inotify`, if given), then pins
    /// the process whose pid it holds and proves it the owner: after the pidfd is open, the
    /// lock is still held and the file still names that pid. Returns the pidfd, the pid and
    /// the file's status.
    private static func pinOwner(lockPath: String, inotify: Int32?,
                                 address: PortAddress) throws(PortError) -> (pidfd: Int32, pid: pid_t, status: stat) {
        let lock: Int32
        do {
            lock = try Kernel.open(lockPath, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        } catch where error.code == .fileNotFound {
            throw .remoteInvalid(address)
        } catch {
            throw .system(error)
        }
        defer { Kernel.close(lock) }
        // The inode opened, not whatever the path names later: a new owner's file is a new port.
        if let inotify {
            _ = try asPortError { () throws(SystemCallError) in
                try Kernel.watchFile(inotify, "/proc/self/fd/\(lock)", mask: UInt32(IN_ATTRIB | IN_DELETE_SELF))
            }
        }
        let status = try asPortError { () throws(SystemCallError) in try Kernel.status(lock) }
        guard status.st_nlink > 0 else { throw .remoteInvalid(address) }
        // A new owner writes its pid just after taking the lock: until then the file holds the
        // previous owner's, which is either gone (ESRCH) or fails the second reading. Bounded.
        for _ in 0..<1_000 {
            guard try asPortError({ () throws(SystemCallError) in try Kernel.isLockedByAnother(lock) }) else {
                throw .remoteInvalid(address)
            }
            guard let pid = NameLock.writtenPID(lock), pid > 0 else {
                sched_yield()
                continue
            }
            let pidfd: Int32
            do {
                pidfd = try Kernel.processDescriptor(pid)
            } catch where error.code == .noSuchProcess {
                sched_yield()
                continue
            } catch {
                throw .system(error)
            }
            // Pinned: from here the pidfd is that process's for good. The lock still held and
            // the pid still written prove it the owner (a dead owner holds no lock).
            let stillOwner: Bool
            do {
                stillOwner = try Kernel.isLockedByAnother(lock) && NameLock.writtenPID(lock) == pid
            } catch {
                Kernel.close(pidfd)
                throw .system(error)
            }
            if stillOwner { return (pidfd, pid, status) }
            Kernel.close(pidfd)
        }
        throw .remoteInvalid(address)
    }

    // MARK: - On the loop's thread

    private func deathEvent(_ event: DescriptorSource.Event) {
        guard case .ready = event else { return invalidate() }
        finish(.ownerDied)
    }

    private func lifeEvent() {
        if case .lifePage(let watch, _) = withdrawal, let loss = watch.loss { finish(loss) }
    }

    private func withdrawalEvent(_ event: DescriptorSource.Event) {
        guard case .lockFile(let watch, let device, let inode) = withdrawal else { return }
        guard case .ready = event else { return invalidate() }
        // Drain the events (the descriptor is level-triggered); any of them may be the unlink.
        var buffer = [UInt8](repeating: 0, count: 1024)
        while ((try? buffer.withUnsafeMutableBytes { (bytes) throws(SystemCallError) in try Kernel.read(watch.descriptor, into: bytes) }) ?? 0) > 0 {}
        // IN_ATTRIB also comes of a chmod or touch: gone means unlinked (or replaced by a new owner's).
        guard let named = try? Kernel.status(lockPath),
              UInt64(named.st_dev) == device, UInt64(named.st_ino) == inode else {
            return finish(.portInvalidated)
        }
    }

    /// Tells the handler, then closes the descriptors: closing an inotify descriptor waits
    /// for the kernel's SRCU grace period (milliseconds), which must not delay the news.
    private func finish(_ loss: PortLoss) {
        guard let handler else { return }
        self.handler = nil // one-shot: a second ready descriptor in the same pass finds none
        handler(loss)
        invalidate()
    }

    fileprivate var deathSource: DescriptorSource { death }

    /// The withdrawal's source in a loop: the life page's, or the lock file watch's.
    fileprivate func addWithdrawal(to loop: ThreadRunLoop, _ mode: LoopMode) {
        switch withdrawal {
        case .lifePage(_, let told): loop.add(told, to: mode)
        case .lockFile(let watch, _, _): loop.add(watch, to: mode)
        }
    }

    fileprivate func removeWithdrawal(from loop: ThreadRunLoop, _ mode: LoopMode) {
        switch withdrawal {
        case .lifePage(_, let told): loop.remove(told, from: mode)
        case .lockFile(let watch, _, _): loop.remove(watch, from: mode)
        }
    }
}

/// The loss source, weakly, for its descriptors' handlers (see `DescriptorSource.wrapper`
/// for what keeps it alive).
private final class PortLossBox: @unchecked Sendable {
    weak var source: PortLossSource? // set once, in the source's init, before any event
}

extension ThreadRunLoop {
    /// Adds a port-loss source to `mode`: its handler is called on this loop's thread, during
    /// a run in one of its modes, once the port's owner died or invalidated it.
    public func add(_ source: PortLossSource, to mode: LoopMode = .default) {
        add(source.deathSource, to: mode)
        source.addWithdrawal(to: self, mode)
    }

    public func remove(_ source: PortLossSource, from mode: LoopMode = .default) {
        remove(source.deathSource, from: mode)
        source.removeWithdrawal(from: self, mode)
    }

    public func contains(_ source: PortLossSource, in mode: LoopMode = .default) -> Bool {
        contains(source.deathSource, in: mode)
    }
}
