import RunLoopSystem
import Glibc

/// The per-user directory where named ports of all processes live: an ipc socket file
/// `<name>.sock` and a lock file `<name>.lock` per name.
///
/// It is `$RUNLOOPKIT_RUNTIME_DIR` if set, else `$XDG_RUNTIME_DIR/runloopkit`, else
/// `/tmp/runloopkit-<uid>`. RunLoopKit creates it with mode 0700 and refuses to use it
/// unless it is a real directory (not a link) owned by this user and closed to others, so
/// no other user can reach the sockets inside.
enum RuntimeDirectory {
    /// The directory's path, checked (and created) once per process.
    static func path() throws(PortError) -> String {
        try checked.get()
    }

    private static let checked: Result<String, PortError> = {
        func variable(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
        let path = variable("RUNLOOPKIT_RUNTIME_DIR")
            ?? variable("XDG_RUNTIME_DIR").map { "\($0)/runloopkit" }
            ?? "/tmp/runloopkit-\(getuid())"
        return Result { () throws(PortError) in try prepare(path) }
    }()

    /// Creates `path` with mode 0700 if missing, then checks it is safe to use.
    static func prepare(_ path: String) throws(PortError) -> String {
        let info = try asPortError { () throws(SystemCallError) in
            try Kernel.makeDirectory(path, 0o700)
            return try Kernel.linkStatus(path)
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw .runtimeDirectoryUnsafe(path: path, reason: "not a directory (or a symbolic link)")
        }
        guard info.st_uid == getuid() else {
            throw .runtimeDirectoryUnsafe(path: path, reason: "owned by uid \(info.st_uid), not \(getuid())")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw .runtimeDirectoryUnsafe(path: path, reason: "mode \(String(info.st_mode & 0o777, radix: 8)) lets others in")
        }
        return path
    }

    /// The longest ipc socket path libzmq accepts (`sockaddr_un.sun_path` less the NUL).
    static let maxSocketPathBytes = 107
}
