import CLinuxPoll
import Glibc

/// A packet a unix `SOCK_SEQPACKET` socket received (`Kernel.receiveWithDescriptors`): how
/// many bytes, and the descriptors it carried, now this process's (close-on-exec), which
/// the caller owns and must close or keep.
package struct ReceivedPacket: Sendable, Equatable {
    /// The bytes received into the caller's buffer; 0 with no descriptors: the peer closed.
    package var byteCount: Int
    /// The descriptors the packet carried (`SCM_RIGHTS`), in the order they were sent.
    package var descriptors: [Int32]
    /// The packet did not fit: bytes past the buffer (`MSG_TRUNC`) or descriptors past the
    /// control buffer (`MSG_CTRUNC`) were discarded by the kernel.
    package var truncated: Bool
}

/// Unix sockets that pass descriptors between processes (`SCM_RIGHTS`), each call through
/// `systemCall`. Every socket is non-blocking and close-on-exec, every received descriptor
/// close-on-exec from the moment it arrives (`MSG_CMSG_CLOEXEC`): a thread that forks and
/// execs meanwhile leaks none of them into the new program.
extension Kernel {
    /// The most descriptors one packet carries (Linux's `SCM_MAX_FD`).
    package static let maxDescriptorsPerPacket = 253

    /// `socket(2)`: a unix `SOCK_SEQPACKET` socket, non-blocking and close-on-exec.
    package static func unixPacketSocket() throws(SystemCallError) -> Int32 {
        try systemCall("socket(AF_UNIX, SOCK_SEQPACKET)") {
            socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
    }

    /// `socketpair(2)`: two connected unix `SOCK_SEQPACKET` sockets, non-blocking and close-on-exec.
    package static func unixPacketPair() throws(SystemCallError) -> (Int32, Int32) {
        var pair: [Int32] = [-1, -1]
        try systemCall("socketpair(AF_UNIX, SOCK_SEQPACKET)") {
            socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
                       0, &pair)
        }
        return (pair[0], pair[1])
    }

    /// `bind(2)` of unix socket `fd` to `path`, then `listen(2)` with `backlog`.
    /// `ENAMETOOLONG` for a path longer than `sockaddr_un` holds.
    package static func listen(_ fd: Int32, atUnixPath path: String, backlog: Int32) throws(SystemCallError) {
        try systemCall("bind(\(path))") { clinux_bind_unix(fd, path) }
        try systemCall("listen(\(path))") { Glibc.listen(fd, backlog) }
    }

    /// `connect(2)` of non-blocking unix socket `fd` to the listener at `path`, which never
    /// waits: a unix listener takes the connection at once into its backlog, or refuses it
    /// with `again` when the backlog is full.
    package static func connect(_ fd: Int32, toUnixPath path: String) throws(SystemCallError) {
        try systemCall("connect(\(path))") { clinux_connect_unix(fd, path) }
    }

    /// `accept4(2)` of one pending connection on listener `fd`, non-blocking and
    /// close-on-exec; nil when none is pending.
    package static func accept(_ fd: Int32) throws(SystemCallError) -> Int32? {
        do {
            return try systemCall("accept4") { clinux_accept_nonblocking(fd) }
        } catch where error.code == .again {
            return nil
        }
    }

    /// `getsockopt(SO_PEERCRED)`: the process that made the other end of unix socket `fd`,
    /// as the kernel recorded it when it connected (not what the peer says).
    package static func peerCredentials(_ fd: Int32) throws(SystemCallError) -> (pid: pid_t, uid: uid_t, gid: gid_t) {
        var (pid, uid, gid): (pid_t, uid_t, gid_t) = (0, 0, 0)
        try systemCall("getsockopt(SO_PEERCRED)") { clinux_peer_credentials(fd, &pid, &uid, &gid) }
        return (pid, uid, gid)
    }

    /// `sendmsg(2)` of `bytes` (one packet) with `descriptors` (at most
    /// `maxDescriptorsPerPacket`) in one `SCM_RIGHTS` message, never waiting, never raising
    /// `SIGPIPE`. The receiver gets descriptors of its own; the caller's stay open. When it
    /// returns true the packet is in the receiving socket's queue (a unix socket queues at
    /// the receiver, not the sender). False when that queue is full (`again`): nothing was sent.
    package static func sendWithDescriptors(_ fd: Int32, _ bytes: UnsafeRawBufferPointer,
                                            descriptors: [Int32]) throws(SystemCallError) -> Bool {
        precondition(descriptors.count <= maxDescriptorsPerPacket, "at most \(maxDescriptorsPerPacket) descriptors a packet")
        do {
            _ = try systemCall("sendmsg(SCM_RIGHTS)") {
                descriptors.withUnsafeBufferPointer { fds in
                    clinux_send_descriptors(fd, bytes.baseAddress, bytes.count, fds.baseAddress, Int32(fds.count))
                }
            }
            return true
        } catch where error.code == .again {
            return false
        }
    }

    /// `recvmsg(2)` of one packet into `buffer`, never waiting, with its descriptors
    /// close-on-exec (`MSG_CMSG_CLOEXEC`); nil when none is queued. The caller owns every
    /// descriptor returned, a truncated packet's included.
    package static func receiveWithDescriptors(_ fd: Int32,
                                               into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> ReceivedPacket? {
        var descriptors = [Int32](repeating: -1, count: maxDescriptorsPerPacket)
        var count: Int32 = 0
        var flags: Int32 = 0
        let received: Int
        do {
            received = try systemCall("recvmsg(SCM_RIGHTS)") {
                descriptors.withUnsafeMutableBufferPointer { fds in
                    clinux_receive_descriptors(fd, buffer.baseAddress, buffer.count, fds.baseAddress, &count, &flags)
                }
            }
        } catch where error.code == .again {
            return nil
        }
        descriptors.removeSubrange(Int(count)...)
        let truncated = flags & Int32(MSG_TRUNC) != 0 || flags & Int32(MSG_CTRUNC) != 0
        return ReceivedPacket(byteCount: received, descriptors: descriptors, truncated: truncated)
    }
}

extension Kernel {
    /// `poll(2)` of one descriptor for `POLLOUT`, at most `timeout`: true when it became
    /// writable (or has an error or hang-up to report, which the next write returns), false
    /// when the time ran out. For a unix packet socket, writable means its send buffer has
    /// room again.
    package static func waitUntilWritable(_ fd: Int32, timeout: Duration) throws(SystemCallError) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let milliseconds = max(0, min(Int64(Int32.max), seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000))
        var item = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        let ready = try systemCall("poll(POLLOUT)") { Glibc.poll(&item, 1, Int32(milliseconds)) }
        return ready > 0
    }
}

extension Kernel {
    /// `poll(2)` of `fds` without waiting: those whose peer closed its end (`POLLHUP` or
    /// `POLLRDHUP`; what it sent before may still be queued to read).
    package static func hungUp(_ fds: [Int32]) throws(SystemCallError) -> [Int32] {
        guard !fds.isEmpty else { return [] }
        let hangUp = Int16(POLLHUP) | 0x2000 // POLLRDHUP (glibc hides it behind _GNU_SOURCE)
        var items = fds.map { pollfd(fd: $0, events: 0x2000, revents: 0) }
        let ready = try systemCall("poll(POLLRDHUP)") {
            items.withUnsafeMutableBufferPointer { Glibc.poll($0.baseAddress, nfds_t($0.count), 0) }
        }
        guard ready > 0 else { return [] }
        return items.filter { $0.revents & hangUp != 0 }.map(\.fd)
    }
}
