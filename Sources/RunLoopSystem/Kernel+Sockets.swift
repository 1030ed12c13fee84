import Glibc

/// Socket calls for a descriptor libzmq owns, which RunLoopKit only holds open a little
/// longer (see `ZMQConnectionMonitor.closeWatched`). Each through `systemCall`.
extension Kernel {
    /// `fcntl(2)` with `F_DUPFD_CLOEXEC`: a new descriptor for the same open socket or file.
    package static func duplicate(_ fd: Int32) throws(SystemCallError) -> Int32 {
        try systemCall("fcntl(F_DUPFD_CLOEXEC)") { fcntl(fd, F_DUPFD_CLOEXEC, 0) }
    }

    /// The path of the unix socket `fd` is connected to, via `getpeername(2)`; nil for a
    /// socket of another family or an unnamed peer.
    package static func unixPeerPath(_ fd: Int32) throws(SystemCallError) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        try withUnsafeMutablePointer(to: &address) { pointer throws(SystemCallError) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress throws(SystemCallError) in
                _ = try systemCall("getpeername") { getpeername(fd, socketAddress, &length) }
            }
        }
        guard address.sun_family == sa_family_t(AF_UNIX) else { return nil }
        let pathCapacity = MemoryLayout.size(ofValue: address.sun_path)
        let pathLength = min(pathCapacity, Int(length) - MemoryLayout<sa_family_t>.size)
        guard pathLength > 0 else { return nil }
        return withUnsafeBytes(of: address.sun_path) { bytes in
            let path = bytes.prefix(pathLength)
            return String(decoding: path.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    /// For a unix stream socket, the bytes it wrote that its peer has not read yet
    /// (`ioctl(2)` `SIOCOUTQ`).
    package static func unreadOutgoingBytes(_ fd: Int32) throws(SystemCallError) -> Int {
        var bytes: Int32 = 0
        _ = try systemCall("ioctl(SIOCOUTQ)") { ioctl(fd, UInt(TIOCOUTQ), &bytes) }
        return Int(bytes)
    }
}
