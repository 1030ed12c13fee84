import RunLoopSystem
import RunLoopZMQ
import Glibc

/// A CURVE key pair for a port that accepts tcp (or ipc) peers only when they know its
/// public key, and encrypts their traffic (ZeroMQ's CURVE, from libzmq).
///
/// Give `publicKey` to the peers; keep the pair itself to the port's process. Neither
/// `description` nor RunLoopKit's logs ever show the secret key.
///
/// Key files (`write(to:)`, `init(contentsOf:)`) use CZMQ's certificate format, so CZMQ's
/// `zcert` and RunLoopKit read each other's files; see `docs/security.md`.
public struct PortKeyPair: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The public key, as 40 characters of Z85 text, for `RemotePort(_:curveServerKey:)`.
    public var publicKey: String { publicCurveKey.z85 }

    let publicCurveKey: ZMQCurveKey
    let secretCurveKey: ZMQCurveKey

    /// A new random key pair (`zmq_curve_keypair`).
    public static func generate() throws(PortError) -> PortKeyPair {
        do {
            let (publicKey, secretKey) = try ZMQCurve.generateKeyPair()
            return PortKeyPair(publicCurveKey: publicKey, secretCurveKey: secretKey)
        } catch {
            throw .system(error)
        }
    }

    /// A key pair from its two Z85 texts, or nil if either is not a valid key.
    public init?(publicKey: String, secretKey: String) {
        guard let publicCurveKey = ZMQCurveKey(z85: publicKey), let secretCurveKey = ZMQCurveKey(z85: secretKey) else {
            return nil
        }
        self.init(publicCurveKey: publicCurveKey, secretCurveKey: secretCurveKey)
    }

    init(publicCurveKey: ZMQCurveKey, secretCurveKey: ZMQCurveKey) {
        self.publicCurveKey = publicCurveKey
        self.secretCurveKey = secretCurveKey
    }

    public var description: String { "PortKeyPair(public: \(publicKey), secret: <redacted>)" }

    /// `dump` and debuggers see the public key only.
    public var customMirror: Mirror { Mirror(self, children: ["publicKey": publicKey]) }

    // MARK: - Key files

    /// Writes the pair (public and secret key) to a new or existing file at `path`, with
    /// mode 0600 whatever the umask or the file's mode before: only its owner may read it.
    /// The file is replaced whole or not at all: the pair goes to a new file in the same
    /// directory, synced, then renamed over `path`, so a write that fails or a crash leaves
    /// the key that was there intact. The format is CZMQ's secret certificate:
    ///
    ///     metadata
    ///     curve
    ///         public-key = "<40 Z85 characters>"
    ///         secret-key = "<40 Z85 characters>"
    public func write(to path: String) throws(PortError) {
        try write(to: path, exclusive: false)
    }

    /// `write(to:)`, or with `exclusive` a new file only: fails with `.system(fileExists)`
    /// if anything is at `path`, even a file made between a check and this call.
    package func write(to path: String, exclusive: Bool) throws(PortError) {
        let text = "#   RunLoopKit CURVE key pair (CZMQ certificate format): keep it private, mode 0600\n"
            + "metadata\ncurve\n    public-key = \"\(publicKey)\"\n    secret-key = \"\(secretCurveKey.z85)\"\n"
        try PortKeyFile.write(text, to: path, mode: 0o600, exclusive: exclusive)
    }

    /// Writes the public key alone to `path`, mode 0644 (it is public): the file a port's
    /// allow-list directory holds for this client (`PortClientAllowList(directory:)`).
    public func writePublicKey(to path: String) throws(PortError) {
        try writePublicKey(to: path, exclusive: false)
    }

    /// `writePublicKey(to:)`, or with `exclusive` a new file only (as `write(to:exclusive:)`).
    package func writePublicKey(to path: String, exclusive: Bool) throws(PortError) {
        let text = "#   RunLoopKit CURVE public key (CZMQ certificate format)\n"
            + "metadata\ncurve\n    public-key = \"\(publicKey)\"\n"
        try PortKeyFile.write(text, to: path, mode: 0o644, exclusive: exclusive)
    }

    /// Reads a key pair that `write(to:)` (or CZMQ's `zcert_save_secret`) wrote; also takes
    /// a file whose first two lines are the public and the secret key in Z85. Refuses with
    /// `keyFileUnsafe` a file that is not a regular file owned by this user, or that others
    /// may read or write (mode & 077 not 0: `chmod 600` it); `invalidKey` if it holds no pair.
    public init(contentsOf path: String) throws(PortError) {
        let text = try PortKeyFile.read(path, secret: true)
        let keys = PortKeyFile.keys(in: text)
        guard let publicKey = keys.publicKey, let secretKey = keys.secretKey,
              let pair = PortKeyPair(publicKey: publicKey, secretKey: secretKey)
        else {
            throw .invalidKey("\(path) holds no CURVE key pair (public-key and secret-key lines, or two Z85 lines)")
        }
        self = pair
    }
}

/// Reading and writing key files (`PortKeyPair`, `PortClientAllowList`).
enum PortKeyFile {
    /// The most bytes a key file may have: a certificate is a few hundred.
    static let maxBytes = 64 * 1024

    /// Writes `text` to `path` whole or not at all, never in place: to a new file in the same
    /// directory (`.NAME.<pid>.<random>.tmp`, created exclusively with `mode`, which the
    /// umask cannot narrow nor an old file widen), synced to the disk, then renamed over
    /// `path`, and the directory synced. A write that fails or a crash leaves the file that
    /// was at `path` as it was (and at worst a hidden temporary file). With `exclusive`,
    /// the new file is linked at `path` instead of renamed, which fails with `fileExists`
    /// if anything is there: a file at `path` is never replaced, even one made a moment before.
    static func write(_ text: String, to path: String, mode: mode_t, exclusive: Bool = false) throws(PortError) {
        try asPortError { () throws(SystemCallError) in
            let slash = path.lastIndex(of: "/")
            let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
            let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
            let temporary = "\(directory)/.\(name).\(getpid()).\(UInt32.random(in: .min ... .max)).tmp"
            let fd = try Kernel.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode: mode)
            var placed = false
            defer { if !placed { try? Kernel.unlink(temporary) } }
            do {
                defer { Kernel.close(fd) }
                try Kernel.changeMode(fd, mode) // the umask may have taken some away
                try Kernel.writeAll(fd, Array(text.utf8))
                try Kernel.synchronize(fd)
            }
            if exclusive {
                try Kernel.link(temporary, to: path)
                try? Kernel.unlink(temporary)
            } else {
                try Kernel.rename(temporary, to: path)
            }
            placed = true
            try Kernel.synchronizeDirectory(directory)
        }
    }

    /// The text of the key file at `path`, after checking it: a regular file (not a link)
    /// owned by this user (or root, for a public key), and, for a `secret` one, closed to
    /// others (mode & 077 == 0); a public one must not be writable by others.
    static func read(_ path: String, secret: Bool) throws(PortError) -> String {
        let fd: Int32
        do {
            fd = try Kernel.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        } catch {
            throw .keyFileUnsafe(path: path, reason: "cannot open it (\(error)); a symbolic link is refused")
        }
        defer { Kernel.close(fd) }
        let info = try asPortError { () throws(SystemCallError) in try Kernel.status(fd) }
        try check(info, path: path, secret: secret)
        var bytes = [UInt8](repeating: 0, count: maxBytes)
        var count = 0
        while count < maxBytes {
            let start = count
            let read = try asPortError { () throws(SystemCallError) in
                try bytes.withUnsafeMutableBufferPointer { buffer throws(SystemCallError) in
                    try Kernel.read(fd, into: UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[start...]))
                }
            }
            if read == 0 { break }
            count += read
        }
        return String(decoding: bytes[..<count], as: UTF8.self)
    }

    static func check(_ info: stat, path: String, secret: Bool) throws(PortError) {
        guard info.st_mode & S_IFMT == S_IFREG else { throw .keyFileUnsafe(path: path, reason: "not a regular file") }
        let mode = info.st_mode & 0o777
        if secret {
            guard info.st_uid == geteuid() else {
                throw .keyFileUnsafe(path: path, reason: "owned by uid \(info.st_uid), not \(geteuid())")
            }
            guard mode & 0o077 == 0 else {
                throw .keyFileUnsafe(path: path, reason: "mode \(String(mode, radix: 8)) lets others read it: chmod 600 it")
            }
        } else {
            try checkNotOpenToOthers(info, path: path)
        }
    }

    /// A public key file or the directory that holds them must be ours (or root's) and
    /// closed to writers other than its owner: whoever can write one can add a client.
    static func checkNotOpenToOthers(_ info: stat, path: String) throws(PortError) {
        guard info.st_uid == geteuid() || info.st_uid == 0 else {
            throw .keyFileUnsafe(path: path, reason: "owned by uid \(info.st_uid), not \(geteuid())")
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o022 == 0 else {
            throw .keyFileUnsafe(path: path, reason: "mode \(String(mode, radix: 8)) lets others write it: chmod go-w it")
        }
    }

    /// The keys in a key file's text: the `public-key = "..."` and `secret-key = "..."`
    /// lines of a CZMQ certificate, else the first and second lines that are 40 characters
    /// of Z85 (blank lines and `#` comments skipped).
    static func keys(in text: String) -> (publicKey: String?, secretKey: String?) {
        var named: [String: String] = [:]
        var plain: [String] = []
        for rawLine in text.split(whereSeparator: \.isNewline) {
            let line = rawLine.trimmingSpaces
            if line.utf8.count == ZMQCurveKey.z85Count, ZMQCurveKey(z85: line) != nil {
                plain.append(line)
                continue
            }
            guard !line.hasPrefix("#"), let equals = line.firstIndex(of: "=") else { continue }
            let name = line[..<equals].trimmingSpaces
            var value = line[line.index(after: equals)...].trimmingSpaces
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            if name == "public-key" || name == "secret-key", named[name] == nil { named[name] = value }
        }
        if named["public-key"] != nil { return (named["public-key"], named["secret-key"]) }
        return (plain.first, plain.dropFirst().first)
    }
}

private extension StringProtocol {
    /// Without leading and trailing spaces and tabs.
    var trimmingSpaces: String {
        let isSpace = { (character: Character) in character == " " || character == "\t" || character == "\r" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
