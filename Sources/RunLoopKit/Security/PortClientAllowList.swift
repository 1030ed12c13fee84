import RunLoopSystem
import RunLoopZMQ
import Glibc

/// The clients a CURVE port accepts, by their long-term public keys (CZMQ's `zauth`
/// allow-list with its certificate directory): a set of keys given in code, and the keys
/// of a directory's files, read again by `reload()`. Given to `LocalPort.requireCurve(_:allowing:)`.
///
/// A client whose key is on neither is refused during the security handshake (ZAP status
/// 400): none of its messages reaches the port; it gets `PortError.notAuthorized`, and the
/// port counts it (`PortStatistics.clientsRefused`) and logs it. A client shows its key by
/// connecting with `RemotePort(_:curveServerKey:clientKeys:)`.
///
/// The directory holds one public key per file (hidden files skipped), each in CZMQ's
/// certificate format (a `public-key = "..."` line, as `PortKeyPair.writePublicKey(to:)`
/// and `zcert_save_public` write) or as 40 characters of Z85 on the first line. The
/// directory and its files must be this user's (or root's) and writable by no one else.
///
/// Thread safety: any thread. The port's ZAP handler reads the keys on its own thread;
/// `reload()` replaces them at once, for the handshakes that follow.
public final class PortClientAllowList: Sendable, CustomStringConvertible {
    /// The directory, if the list has one.
    public let directory: String?
    private let fixed: Set<ZMQCurveKey>
    /// The keys read from the directory by the last successful load; protected by its lock.
    private let loaded = LockedValue<Set<ZMQCurveKey>>([])

    /// A list of these keys (Z85). Throws `invalidKey` for one that is not a key.
    public convenience init(publicKeys: some Sequence<String>) throws(PortError) {
        try self.init(directory: nil, publicKeys: publicKeys)
    }

    /// A list of the keys in `directory`'s files, and `publicKeys` besides; reads the
    /// directory now. Throws `keyFileUnsafe` for a directory or file open to other writers
    /// (or unreadable), `invalidKey` for a file or key that holds no key.
    public init(directory: String?, publicKeys: some Sequence<String> = []) throws(PortError) {
        var keys = Set<ZMQCurveKey>()
        for text in publicKeys {
            guard let key = ZMQCurveKey(z85: text) else { throw .invalidKey("'\(text.prefix(8))…' is not 40 characters of Z85") }
            keys.insert(key)
        }
        fixed = keys
        self.directory = directory
        try reload()
    }

    /// Reads the directory again: from the next handshake on, a key added is accepted and a
    /// key removed is refused (connections already made stay). If anything in it is wrong,
    /// throws (as `init`) and keeps the keys it had.
    public func reload() throws(PortError) {
        guard let directory else { return }
        let info: stat
        let names: [String]
        do {
            info = try Kernel.linkStatus(directory)
            names = try Kernel.directoryEntries(directory)
        } catch {
            throw .keyFileUnsafe(path: directory, reason: "cannot read it (\(error))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw .keyFileUnsafe(path: directory, reason: "not a directory") }
        try PortKeyFile.checkNotOpenToOthers(info, path: directory)
        var keys = Set<ZMQCurveKey>()
        for name in names.sorted() where !name.hasPrefix(".") {
            let path = "\(directory)/\(name)"
            let text = try PortKeyFile.read(path, secret: false)
            guard let z85 = PortKeyFile.keys(in: text).publicKey, let key = ZMQCurveKey(z85: z85) else {
                throw .invalidKey("\(path) holds no public key (a public-key = \"...\" line, or 40 characters of Z85)")
            }
            keys.insert(key)
        }
        loaded.withLock { $0 = keys }
    }

    /// Whether `publicKey` (Z85) is on the list.
    public func contains(publicKey: String) -> Bool {
        ZMQCurveKey(z85: publicKey).map(contains) ?? false
    }

    func contains(_ key: ZMQCurveKey) -> Bool {
        fixed.contains(key) || loaded.withLock { $0.contains(key) }
    }

    /// The number of keys on the list.
    public var count: Int { loaded.withLock { $0.union(fixed).count } }

    public var description: String {
        "PortClientAllowList(\(count) keys\(directory.map { ", directory: \($0)" } ?? ""))"
    }
}
