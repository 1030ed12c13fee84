import RunLoopSystem
import Glibc

/// The named ports of this user's runtime directory, as tools see them: every name with a
/// lock file, and whether a live process holds it (the same lock test that `RemotePort(named:)`
/// uses). A name whose owner died keeps its lock file until the name is registered again.
///
/// Thread safety: every member may be used from any thread; each call reads the directory anew.
public enum PortRegistry {
    /// The runtime directory's path (`$RUNLOOPKIT_RUNTIME_DIR`, else
    /// `$XDG_RUNTIME_DIR/runloopkit`, else `/tmp/runloopkit-<uid>`), created if missing.
    public static func runtimeDirectory() throws(PortError) -> String {
        try RuntimeDirectory.path()
    }

    /// Every name with a lock file in the runtime directory, live or dead, sorted by name.
    public static func registeredNames() throws(PortError) -> [RegisteredPortName] {
        let directory = try RuntimeDirectory.path()
        let files = try asPortError { () throws(SystemCallError) in try Kernel.directoryEntries(directory) }
        var entries: [RegisteredPortName] = []
        for file in files where file.hasSuffix(".lock") {
            let name = String(file.dropLast(".lock".count))
            guard (try? PortName.validate(name)) != nil else { continue }
            entries.append(try entry(name, in: directory))
        }
        return entries.sorted { $0.name < $1.name }
    }

    /// The name's entry, or nil when it has no lock file (no port ever held it, or its
    /// last owner gave it back). Throws `invalidName` for a name that breaks `PortName`'s rules.
    public static func registration(named name: String) throws(PortError) -> RegisteredPortName? {
        try PortName.validate(name)
        let directory = try RuntimeDirectory.path()
        guard Kernel.exists("\(directory)/\(name).lock") else { return nil }
        return try entry(name, in: directory)
    }

    /// Throws `.system` when the lock cannot be tested (`EMFILE` at the descriptor limit).
    private static func entry(_ name: String, in directory: String) throws(PortError) -> RegisteredPortName {
        let owner = try asPortError { () throws(SystemCallError) in try NameLock.liveOwner(name: name, directory: directory) }
        let pid: Int32? = if let owner { owner > 0 ? owner : nil } else { NameLock.lastOwner(name: name, directory: directory) }
        return RegisteredPortName(name: name, isAlive: owner != nil, ownerPID: pid,
                                  address: PortAddress(unchecked: "ipc://\(directory)/\(name).sock"))
    }
}
