import RunLoopCore
import RunLoopSystem
import Glibc

/// What a `PortNameWatch` tells its handler about the name it watches.
public enum PortNameEvent: Sendable, Equatable, CustomStringConvertible {
    /// A live port holds the name and can be reached: its socket listens at this address
    /// and its owner process holds the name's lock.
    case appeared(RemotePort)
    /// No live port holds the name: none did yet, or its owner invalidated the port, gave
    /// the name back, exited or was killed.
    case vanished

    public var description: String {
        switch self {
        case .appeared(let port): "appeared at \(port.address)"
        case .vanished: "vanished"
        }
    }
}

/// A port name watched as a run-loop source (GDBus's `g_bus_watch_name`): its handler is
/// told, on the loop's thread, when a port of any process of this user takes the name
/// (`.appeared` with the port) and when it goes (`.vanished`).
///
///     let watch = try PortNameWatch(name: "image-server") { event in
///         switch event {
///         case .appeared(let server): print("server up at \(server)")
///         case .vanished: print("no server")
///         }
///     }
///     ThreadRunLoop.current.add(watch, to: .default)
///
/// The first event says the state when the loop first runs the watch in one of its modes:
/// `.appeared` if a live port holds the name, else `.vanished`. From then on the events
/// alternate, `.appeared`, `.vanished`, `.appeared`…, never two of a kind in a row: a name
/// that changes hands (its owner died or gave it back, and another process took it before
/// the watching loop looked) is reported `.vanished`, then `.appeared` with the new owner.
///
/// A name appears with the last step of its registration: the owner writes its pid into
/// the name's lock file once its socket listens (`LocalPort(name:)`, `register(name:)`), so
/// a port reported appeared can be sent to. It vanishes when its owner invalidates the port
/// (the owner removes the name's files), and when the owner process exits or is killed: the
/// watch pins the owner with a pidfd, which the kernel makes readable the moment the process
/// has ended. The owner is proven, as `PortLossSource` proves it: the pid is read from the
/// lock file, the process pinned, then the lock is checked still held and the file still
/// naming that pid, and the process not yet ended.
///
/// Nothing polls: the watch is one descriptor in the loop's poll set (an epoll instance
/// holding an inotify watch of the runtime directory and, while the name is held, the
/// owner's pidfd), costs nothing while idle and holds no thread. Registrations of other
/// names in the directory wake it briefly; it looks at the name's lock only when the name's
/// files changed. Making a watch costs more than watching: `inotify_add_watch` on the
/// directory walks the kernel's cached entries of it, negative ones included (0.6-0.9 ms of
/// CPU measured in a directory that thousands of test names had passed through; a name
/// appearing costs the watching thread about 0.1 ms). Invalidating the watch closes its
/// descriptors (on its loop's thread, at its next pass, if it is on a loop); so does its
/// release once it is on no loop (removed from its modes) and nothing else holds it.
/// Closing an inotify descriptor waits for the kernel's SRCU grace period: that close can
/// hold the loop's thread for some milliseconds.
///
/// One window is left: for the few microseconds between a new owner taking a dead owner's
/// lock and emptying its file, the file still names the dead owner; were that pid already
/// reused by a live process, the watch could report the name appeared early (then vanished
/// and appeared again as the new owner's steps come: the events still alternate).
///
/// Like every source it lives in modes: the handler runs only while its loop runs in one of
/// the modes it was added to; what happens while the loop runs in another mode is reported
/// once it runs in one of them, as the state then (changes in between may be folded into one
/// `.vanished`/`.appeared` pair, still alternating). Once added to a loop, the loop keeps the
/// watch until it is invalidated or removed from its modes. A watch belongs to one loop.
///
/// Thread safety: `invalidate()` and `isValid` from any thread; the handler runs on the
/// loop's thread.
public final class PortNameWatch: @unchecked Sendable {
    /// The name watched.
    public let name: String
    /// The epoll instance in the loop's poll set; its handler owns the watch's state.
    private let source: DescriptorSource

    /// Watches `name`. Throws `invalidName` for a name no port can have, the runtime
    /// directory's errors (`runtimeDirectoryUnsafe`), and `.system` when a descriptor cannot
    /// be had (`EMFILE`).
    public init(name: String, handler: @escaping (PortNameEvent) -> Void) throws(PortError) {
        try PortName.validate(name)
        let directory = try RuntimeDirectory.path()
        let state = try NameWatchState(name: name, directory: directory, handler: handler)
        self.name = name
        // The handler holds the state: released (and its descriptors closed) with the handler,
        // when the source is invalidated or released.
        source = DescriptorSource(descriptor: state.readiness, watching: .readable, ownership: .owned) { event in
            state.service(event)
        }
        state.source = source
    }

    /// Whether it still watches (false once invalidated). Any thread.
    public var isValid: Bool { source.isValid }

    /// Stops watching, without calling the handler again; its descriptors are closed (on its
    /// loop's thread, at its next pass, if it is on a loop). Any thread.
    public func invalidate() {
        source.invalidate()
    }

    fileprivate var descriptorSource: DescriptorSource { source }
}

/// A watch's descriptors and what it last reported. Loop thread only once the watch is on a
/// loop; owned by the watch's source's handler.
private final class NameWatchState {
    /// The epoll instance the loop watches (closed by the source that owns it).
    let readiness: Int32
    private let inotify: Int32
    /// An eventfd, ready from the start, for the first report; -1 once made.
    private var firstReport: Int32
    /// The owner the watch reported appeared, pinned by its pidfd; nil while vanished.
    private var owner: (pid: pid_t, pidfd: Int32)?
    private let lockPath: String, socketPath: String
    private let lockFile: String, socketFile: String
    private let port: RemotePort
    private let handler: (PortNameEvent) -> Void
    weak var source: DescriptorSource? // set once, right after init, before any event

    private static let inotifyToken: UInt64 = 1, firstReportToken: UInt64 = 2, ownerToken: UInt64 = 3

    init(name: String, directory: String, handler: @escaping (PortNameEvent) -> Void) throws(PortError) {
        lockFile = "\(name).lock"
        socketFile = "\(name).sock"
        lockPath = "\(directory)/\(lockFile)"
        socketPath = "\(directory)/\(socketFile)"
        port = RemotePort(PortAddress(unchecked: "ipc://\(socketPath)"))
        self.handler = handler
        var opened: [Int32] = []
        do throws(SystemCallError) {
            let readiness = try Kernel.readinessDescriptor()
            opened.append(readiness)
            let inotify = try Kernel.inotifyDescriptor()
            opened.append(inotify)
            let firstReport = try Kernel.eventDescriptor()
            opened.append(firstReport)
            // The pid written (IN_MODIFY) is the appearance; a file removed or renamed, an
            // end. Creations and attribute changes (the socket's bind and chmod) come before
            // the pid and would only wake the loop for nothing.
            let mask = IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
            _ = try Kernel.watchFile(inotify, directory, mask: UInt32(mask))
            try Kernel.watchReadable(readiness, inotify, token: NameWatchState.inotifyToken)
            try Kernel.watchReadable(readiness, firstReport, token: NameWatchState.firstReportToken)
            var one: UInt64 = 1
            _ = try withUnsafeBytes(of: &one) { (bytes) throws(SystemCallError) in try Kernel.write(firstReport, bytes) }
            self.readiness = readiness
            self.inotify = inotify
            self.firstReport = firstReport
        } catch {
            opened.forEach(Kernel.close)
            throw .system(error)
        }
    }

    deinit {
        Kernel.close(inotify)
        if firstReport >= 0 { Kernel.close(firstReport) }
        if let owner { Kernel.close(owner.pidfd) }
    }

    // MARK: - On the loop's thread

    func service(_ event: DescriptorSource.Event) {
        guard case .ready = event else { return } // lost: the source is invalid, nothing more comes
        let ready = (try? Kernel.readyTokens(readiness)) ?? []
        let (touched, removed) = drainNotifications()
        if firstReport >= 0 {
            // What was queued before is old news: the first report is the state now.
            Kernel.unwatch(readiness, firstReport)
            Kernel.close(firstReport)
            firstReport = -1
            if let found = liveOwner() {
                pin(found)
                report(.appeared(port))
            } else {
                report(.vanished)
            }
            return
        }
        var vanishedNow = false
        if let owner, removed || ready.contains(NameWatchState.ownerToken) {
            // Its files removed (the owner gave the name back, or a new owner cleared a dead
            // one's), or its process ended: gone, even if a new owner holds the name already.
            Kernel.unwatch(readiness, owner.pidfd)
            Kernel.close(owner.pidfd)
            self.owner = nil
            vanishedNow = true
            report(.vanished)
        }
        if owner == nil, touched || vanishedNow, let found = liveOwner() {
            pin(found)
            report(.appeared(port))
        }
    }

    private func pin(_ found: (pid: pid_t, pidfd: Int32)) {
        do {
            try Kernel.watchReadable(readiness, found.pidfd, token: NameWatchState.ownerToken)
        } catch {
            // Not watchable (ENOMEM): keep it anyway; the owner's files going still tell.
            RunLoopKitLog.names.debug("a name watch cannot watch its owner's pidfd",
                                      metadata: ["name": "\(lockFile)", "error": "\(error)"])
        }
        owner = found
    }

    private func report(_ event: PortNameEvent) {
        guard source?.isValid ?? false else { return } // invalidated by an earlier report's handler
        handler(event)
    }

    /// Reads every queued notification; says whether one concerned the name's files
    /// (`touched`) and whether one removed or renamed them (`removed`). A lost queue
    /// (`IN_Q_OVERFLOW`) or the directory itself going counts as both.
    private func drainNotifications() -> (touched: Bool, removed: Bool) {
        var touched = false, removed = false
        let header = MemoryLayout<inotify_event>.size
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count: Int
            do {
                count = try buffer.withUnsafeMutableBytes { (bytes) throws(SystemCallError) in try Kernel.read(inotify, into: bytes) }
            } catch {
                break // EAGAIN: drained
            }
            guard count > 0 else { break }
            buffer.withUnsafeBytes { bytes in
                var offset = 0
                while offset + header <= count {
                    let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    let nameBytes = bytes[(offset + header)..<min(offset + header + length, count)].prefix { $0 != 0 }
                    offset += header + length
                    if mask & UInt32(IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT) != 0 {
                        touched = true
                        removed = true
                        continue
                    }
                    let file = String(decoding: nameBytes, as: UTF8.self)
                    guard file == lockFile || file == socketFile else { continue }
                    touched = true
                    if mask & UInt32(IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO) != 0 { removed = true }
                }
            }
        }
        return (touched, removed)
    }

    /// The name's live owner, pinned: its lock held, its pid announced (the registration's
    /// last step, after its socket listens), its socket file there, its process not ended,
    /// and after the pidfd is open the lock still held and the file still naming that pid.
    private func liveOwner() -> (pid: pid_t, pidfd: Int32)? {
        guard let lock = try? Kernel.open(lockPath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) else { return nil }
        defer { Kernel.close(lock) }
        guard (try? Kernel.isLockedByAnother(lock)) == true, let pid = NameLock.announcedPID(lock),
              let socket = try? Kernel.linkStatus(socketPath), socket.st_mode & S_IFMT == S_IFSOCK,
              let pidfd = try? Kernel.processDescriptor(pid) else { return nil }
        let proven = (try? Kernel.isReadable(pidfd)) == false
            && (try? Kernel.isLockedByAnother(lock)) == true && NameLock.announcedPID(lock) == pid
            && !NameLock.holderDied(pid, lifePath: NameLife.path(besideLock: lockPath))
        guard proven else {
            Kernel.close(pidfd)
            return nil
        }
        return (pid, pidfd)
    }
}

extension ThreadRunLoop {
    /// Adds a name watch to `mode`: its handler is called on this loop's thread, during a run
    /// in one of its modes, with the name's state, then with each change.
    public func add(_ watch: PortNameWatch, to mode: LoopMode = .default) {
        add(watch.descriptorSource, to: mode)
    }

    public func remove(_ watch: PortNameWatch, from mode: LoopMode = .default) {
        remove(watch.descriptorSource, from: mode)
    }

    public func contains(_ watch: PortNameWatch, in mode: LoopMode = .default) -> Bool {
        contains(watch.descriptorSource, in: mode)
    }
}
