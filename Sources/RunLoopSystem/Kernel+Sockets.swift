import CLinuxPoll
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

/// Tells when the peers of unix stream sockets read what was written to them: an epoll
/// instance watching each socket for `EPOLLOUT`, edge-triggered, so that its descriptor
/// becomes readable after each read a peer makes once less than a quarter of the socket's
/// send buffer is queued (the kernel wakes a unix socket's writers each time its peer
/// frees what it read, `unix_write_space`), and so after the read that empties it. A
/// socket already below that when watched is reported at once. Between waits, `drain()`.
///
/// Thread safety: none; one thread's.
package final class PeerReadWatch {
    /// The epoll instance: readable while a watched socket's peer read since `drain()`.
    package let descriptor: Int32
    private var watched: Set<Int32> = []

    package init() throws(SystemCallError) {
        descriptor = try systemCall("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
    }

    deinit { Kernel.close(descriptor) }

    /// Watches `fd`, once (epoll drops a socket once it is closed).
    package func watch(_ fd: Int32) throws(SystemCallError) {
        guard !watched.contains(fd) else { return }
        var event = epoll_event()
        event.events = EPOLLOUT.rawValue | EPOLLET.rawValue
        event.data.fd = fd
        _ = try systemCall("epoll_ctl(ADD)") { epoll_ctl(descriptor, EPOLL_CTL_ADD, fd, &event) }
        watched.insert(fd)
    }

    /// Takes the reports made so far, without waiting: the descriptor is then readable
    /// again only after another read.
    package func drain() {
        var events = [epoll_event](repeating: epoll_event(), count: 16)
        while (try? systemCall("epoll_wait") { epoll_wait(descriptor, &events, 16, 0) }) == 16 {}
    }
}
