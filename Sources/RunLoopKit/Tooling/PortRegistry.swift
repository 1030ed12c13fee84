import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
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
        let files = try fileNames(in: directory)
        return files.compactMap { file -> RegisteredPortName? in
            guard file.hasSuffix(".lock") else { return nil }
            let name = String(file.dropLast(".lock".count))
            guard (try? PortName.validate(name)) != nil else { return nil }
            return entry(name, in: directory)
        }.sorted { $0.name < $1.name }
    }

    /// The name's entry, or nil when it has no lock file (no port ever held it, or its
    /// last owner gave it back). Throws `invalidName` for a name that breaks `PortName`'s rules.
    public static func registration(named name: String) throws(PortError) -> RegisteredPortName? {
        try PortName.validate(name)
        let directory = try RuntimeDirectory.path()
        guard access("\(directory)/\(name).lock", F_OK) == 0 else { return nil }
        return entry(name, in: directory)
    }

    private static func fileNames(in directory: String) throws(PortError) -> [String] {
        guard let stream = opendir(directory) else {
            throw .system(SystemCallError(call: "opendir(\(directory))", errno: errno))
        }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            names.append(withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) })
        }
        return names
    }

    private static func entry(_ name: String, in directory: String) -> RegisteredPortName {
        let owner = NameLock.liveOwner(name: name, directory: directory)
        let pid: Int32? = if let owner { owner > 0 ? owner : nil } else { lastOwner(name: name, directory: directory) }
        return RegisteredPortName(name: name, isAlive: owner != nil, ownerPID: pid,
                                  address: PortAddress(unchecked: "ipc://\(directory)/\(name).sock"))
    }

    /// The pid a dead owner wrote in the lock file, read without taking or testing the lock.
    private static func lastOwner(name: String, directory: String) -> Int32? {
        let fd = open("\(directory)/\(name).lock", O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 31, 0) }
        let digits = buffer.prefix(max(count, 0)).prefix { $0 >= 0x30 && $0 <= 0x39 }
        return Int32(String(decoding: digits, as: UTF8.self))
    }
}
