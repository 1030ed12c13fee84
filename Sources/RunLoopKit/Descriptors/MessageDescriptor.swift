import RunLoopSystem
import Synchronization

/// An open descriptor a message carries to a process of this host
/// (`LoopMessage.Component.descriptor`; `SCM_RIGHTS`, as XPC's `xpc_fd_create` and D-Bus's
/// `UNIX_FD`), owned by this object: closed when the last reference goes, unless someone
/// took it first (`take()`). A received one is the receiving process's own (close-on-exec),
/// whatever number the sender had. Only named ports (ipc) receive descriptors; a send to a
/// tcp address is refused (`PortError.descriptorsToAnotherHost`). See `docs/wire-format.md`.
///
/// Thread safety: any thread; `take()` and `close()` hand the descriptor over exactly once.
public final class MessageDescriptor: Sendable, Equatable, CustomStringConvertible {
    /// The descriptor while this object owns it; -1 once taken or closed.
    private let owned: Mutex<Int32>

    /// Owns `fd` from now on: closes it when released, unless taken first.
    public init(adopting fd: Int32) {
        precondition(fd >= 0, "not a descriptor: \(fd)")
        owned = Mutex(fd)
    }

    /// Owns a new descriptor for what `fd` refers to (`F_DUPFD_CLOEXEC`); `fd` stays the caller's.
    public convenience init(duplicating fd: Int32) throws(SystemCallError) {
        self.init(adopting: try Kernel.duplicate(fd))
    }

    deinit { close() }

    /// The descriptor, for reading and writing through it while this object owns it; nil
    /// once taken or closed. Valid only while this object lives and owns it.
    public var descriptor: Int32? {
        let fd = owned.withLock { $0 }
        return fd >= 0 ? fd : nil
    }

    /// Takes the descriptor: the caller owns it from now on and must close it. Nil if it
    /// was already taken or closed.
    public func take() -> Int32? {
        let fd = owned.withLock { fd in
            defer { fd = -1 }
            return fd
        }
        return fd >= 0 ? fd : nil
    }

    /// Closes the descriptor now, unless it was taken or closed already.
    public func close() {
        if let fd = take() { Kernel.close(fd) }
    }

    /// The same object: a descriptor is equal to itself only (two objects may refer to one file).
    public static func == (lhs: MessageDescriptor, rhs: MessageDescriptor) -> Bool { lhs === rhs }

    public var description: String {
        descriptor.map { "MessageDescriptor(\($0))" } ?? "MessageDescriptor(taken)"
    }
}
