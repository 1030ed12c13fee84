import RunLoopCore
import RunLoopSystem
import RunLoopZMQ
import Glibc
import Synchronization

/// The name server (`NSMessagePortNameServer`): names of this process's ports, and the
/// runtime directory shared with other processes of the same user.
///
/// Within the process a name resolves to the port's inproc address; in another process,
/// to its ipc socket in the runtime directory. It also maps the ipc and tcp addresses of
/// this process's own ports to their inproc addresses, so that local sends stay in-process.
final class PortDirectory: @unchecked Sendable {
    static let shared = PortDirectory()

    private let lock = Lock()
    private var names: [String: PortAddress] = [:] // name → inproc address; protected by lock
    private var aliases: [PortAddress: PortAddress] = [:] // ipc/tcp → inproc; protected by lock
    /// This process's open ports, by inproc address; protected by lock.
    private var live: [PortAddress: OpenPort] = [:]

    /// An open port, not kept alive by the directory.
    private struct OpenPort {
        weak var port: LocalPort?
    }
    /// The files of the names this process holds, removed at a normal exit (see
    /// `removeNamesAtExit`); protected by lock.
    private var heldFiles: [String: (socket: String, lock: String, life: NameLife)] = [:]
    /// The process that installed the exit handler (0 before it is; set under lock). A
    /// child it forks inherits the handler, and must not remove its parent's names.
    private let exitHandlerProcess = Atomic<Int32>(0)

    /// A name held by one of this process's ports.
    struct Registration {
        let name: String
        let ipcAddress: PortAddress
        let socketPath: String
        let nameLock: NameLock
        /// The page whose lock the owner thread holds while the port lives (`NameLife`).
        let life: NameLife

        /// The descriptor side channel's socket beside the port's: `<dir>/<name>.fds`.
        var descriptorPath: String { Self.descriptorPath(ofSocket: socketPath) }

        static func descriptorPath(ofSocket socketPath: String) -> String {
            String(socketPath.dropLast(".sock".count)) + ".fds"
        }
    }

    /// Takes `name` for a port: validates it, takes its lock (failing with `nameInUse` if a
    /// live port anywhere holds it), makes its life page, whose lock the calling thread (the
    /// port's owner) takes, and clears a dead owner's socket file.
    func reserve(_ name: String) throws(PortError) -> Registration {
        try PortName.validate(name)
        let directory = try RuntimeDirectory.path()
        let socketPath = "\(directory)/\(name).sock"
        guard socketPath.utf8.count <= RuntimeDirectory.maxSocketPathBytes else {
            throw .invalidName(name, reason: "too long for a socket path in \(directory)")
        }
        let nameLock = try NameLock(name: name, directory: directory)
        let life: NameLife
        do {
            life = try NameLife(name: name, directory: directory)
        } catch {
            nameLock.release()
            throw .system(error)
        }
        _ = try? Kernel.unlink(Registration.descriptorPath(ofSocket: socketPath)) // a dead owner's side channel
        if (try? Kernel.unlink(socketPath)) != nil { // a dead owner's
            RunLoopKitLog.names.debug("stale name reclaimed: its dead owner's socket file was removed",
                                      metadata: ["name": "\(name)", "socket": "\(socketPath)"])
        }
        return Registration(name: name, ipcAddress: PortAddress(unchecked: "ipc://\(socketPath)"),
                            socketPath: socketPath, nameLock: nameLock, life: life)
    }

    /// Makes a reserved name resolve to `inProcess` (once its socket is bound), then, last,
    /// writes the owner's pid into the name's lock file: from then on another process sees
    /// the name live and reachable (`PortNameWatch` reports it appeared).
    func publish(_ registration: Registration, inProcess: PortAddress) {
        defer { registration.nameLock.announceOwner() }
        lock.withLock {
            names[registration.name] = inProcess
            aliases[registration.ipcAddress] = inProcess
            heldFiles[registration.name] = (registration.socketPath, registration.nameLock.path, registration.life)
            if exitHandlerProcess.load(ordering: .relaxed) == 0 {
                exitHandlerProcess.store(getpid(), ordering: .relaxed)
                atexit { PortDirectory.shared.removeNamesAtExit() }
            }
        }
    }

    /// At a normal exit (`exit`, or returning from `main`): marks the life pages of the names
    /// still held withdrawn (their watchers see them given back, not their owner dead), and
    /// removes their socket, lock and life files, since ports whose threads never tore them
    /// down (the main thread's, whose thread-exit destructors never run) would otherwise
    /// leave them.
    /// A killed process leaves its names, which the next registration reclaims. A forked
    /// child's exit removes nothing: the names are its parent's, which still serves them.
    private func removeNamesAtExit() {
        // Read before the lock, which a thread that is not in a forked child may hold.
        guard exitHandlerProcess.load(ordering: .relaxed) == getpid() else { return }
        for (socketPath, lockPath, life) in lock.withLock({ heldFiles.values }) {
            life.withdraw()
            _ = try? Kernel.unlink(life.path)
            _ = try? Kernel.unlink(socketPath) // already gone: nothing to remove
            _ = try? Kernel.unlink(Registration.descriptorPath(ofSocket: socketPath))
            _ = try? Kernel.unlink(lockPath)
        }
    }

    /// Gives a name back: unpublishes it, marks its life page withdrawn and gives it back,
    /// removes its socket file and releases its lock. In a child forked after the name was
    /// taken, only the child's copies of the lock's descriptor and the page's mapping go:
    /// the files and the locks are the parent's (`NameLock.release`, `NameLife.release`).
    func withdraw(_ registration: Registration) {
        registration.life.release()
        lock.withLock {
            names[registration.name] = nil
            aliases[registration.ipcAddress] = nil
            heldFiles[registration.name] = nil
        }
        if registration.nameLock.tookItInThisProcess {
            _ = try? Kernel.unlink(registration.socketPath) // already gone: nothing to remove
            _ = try? Kernel.unlink(registration.descriptorPath)
        }
        registration.nameLock.release()
    }

    /// Marks an inproc address as served by `port`, open.
    func opened(_ inProcess: PortAddress, by port: LocalPort) {
        lock.withLock { live[inProcess] = OpenPort(port: port) }
    }

    /// Marks an inproc address as closed; called before the port's socket closes, so that
    /// no sender connects to it afterwards.
    func closing(_ inProcess: PortAddress) {
        lock.withLock { live[inProcess] = nil }
    }

    func isOpen(_ inProcess: PortAddress) -> Bool {
        lock.withLock { live[inProcess] != nil }
    }

    /// An in-process connection to the port at `inProcess`, known to it as `routingID`,
    /// closed: the port, if still open, is told (`LocalPort.inProcessRequesterGone`). Any thread.
    func requesterClosed(_ routingID: RoutingID, connectedTo inProcess: PortAddress) {
        lock.withLock { live[inProcess]?.port }?.inProcessRequesterGone(routingID)
    }

    /// Connects `socket` to an inproc port only while it is open. libzmq lets a socket
    /// connect to an inproc address nobody has bound and quietly queues what is sent to
    /// it, so connecting to a closed port would lose messages without a word.
    func connect(_ socket: ZMQSocket, toOpen inProcess: PortAddress) throws(PortError) {
        lock.lock()
        defer { lock.unlock() }
        guard live[inProcess] != nil else { throw .remoteInvalid(inProcess) }
        do { try socket.connect(inProcess.rawValue) } catch { throw .system(error) }
    }

    func addAlias(_ address: PortAddress, for inProcess: PortAddress) {
        lock.withLock { aliases[address] = inProcess }
    }

    func removeAlias(_ address: PortAddress) {
        lock.withLock { aliases[address] = nil }
    }

    func inProcessAlias(of address: PortAddress) -> PortAddress? {
        guard !address.isInProcess else { return nil }
        return lock.withLock { aliases[address] }
    }

    /// The ipc address of this process's named port at inproc address `inProcess` (where
    /// its name resolves within the process); nil for an unnamed port. For messages with
    /// descriptors, which go beside the ipc socket (its side channel), not over inproc.
    func ipcAlias(ofInProcess inProcess: PortAddress) -> PortAddress? {
        lock.withLock { aliases.first { $0.value == inProcess && $0.key.rawValue.hasPrefix("ipc://") }?.key }
    }

    /// The port registered as `name`, in this process or (over ipc) in another. Throws
    /// `nameNotFound` when no live port holds it, `.system` when its lock cannot be tested.
    func lookUp(_ name: String) throws(PortError) -> RemotePort {
        if let address = lock.withLock({ names[name] }) { return RemotePort(address) }
        try PortName.validate(name)
        let directory = try RuntimeDirectory.path()
        // At the descriptor limit the lock file cannot be opened: EMFILE, not "no owner".
        guard try asPortError({ () throws(SystemCallError) in try NameLock.liveOwner(name: name, directory: directory) }) != nil else {
            throw .nameNotFound(name)
        }
        return RemotePort(PortAddress(unchecked: "ipc://\(directory)/\(name).sock"))
    }
}
