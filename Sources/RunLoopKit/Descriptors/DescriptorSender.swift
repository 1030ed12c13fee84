import Glibc
import RunLoopSystem

/// Why descriptors could not be sent on the side channel; nothing was sent.
package enum DescriptorSendError: Error, Equatable, Sendable {
    /// The receiver's side queue is full (it does not read): the send would wait.
    case wouldBlock
    /// This sender was made by another process (this one is its forked child): its
    /// connection is the parent's, which the receiver would take for the parent.
    case forkedChild
    /// A kernel call failed (no listener at the path, a refused connection…).
    case system(SystemCallError)
}

/// One connection to a port's descriptor side channel (`DescriptorReceiver`), made once per
/// sending thread and destination, as the ZeroMQ sockets are: a unix `SOCK_SEQPACKET`
/// socket, connected and written without ever waiting. Descriptors sent are in the
/// receiver's side queue when `attach` returns (a unix socket queues at the receiver), so
/// before any ZeroMQ message sent after it can be read.
///
/// Thread safety: none; one thread's.
package final class DescriptorSender {
    private let socket: Int32
    /// The process that made the connection: the one the receiver's `SO_PEERCRED` names.
    private let owner: pid_t

    /// Connects to the side channel at `path`, without waiting.
    package init(path: String) throws(DescriptorSendError) {
        let fd: Int32
        do {
            fd = try Kernel.unixPacketSocket()
        } catch {
            throw .system(error)
        }
        do {
            try Kernel.connect(fd, toUnixPath: path)
        } catch {
            Kernel.close(fd)
            throw error.code == .again ? .wouldBlock : .system(error)
        }
        socket = fd
        owner = getpid()
    }

    deinit { Kernel.close(socket) }

    /// Whether the port said it maps shared rings (`DescriptorPacket.welcome`, its
    /// first packet on the connection); read without waiting, false until it came.
    package private(set) var isWelcomed = false

    /// Reads the port's packets without waiting; true once its welcome came.
    package func readWelcome() -> Bool {
        while !isWelcomed {
            var buffer = (UInt64(0), UInt64(0), UInt64(0)) // DescriptorPacket.size bytes
            guard let packet = try? withUnsafeMutableBytes(of: &buffer, { bytes throws(SystemCallError) in
                try Kernel.receiveWithDescriptors(socket, into: bytes)
            }) else { return false }
            packet.descriptors.forEach(Kernel.close) // the port sends none
            guard packet.byteCount > 0 else { return false } // closed
            let bytes = withUnsafeBytes(of: &buffer) { Array($0.prefix(packet.byteCount)) }
            if bytes == DescriptorPacket.welcome { isWelcomed = true }
        }
        return true
    }

    /// The doorbell of the ring of `token`, if the port sent it (`DescriptorPacket.doorbell`)
    /// and it is a socket: read without waiting; any other packet before it (a welcome
    /// not read yet) is dropped, its descriptors closed.
    package func readDoorbell(for token: DescriptorToken) -> Int32? {
        while true {
            var buffer = (UInt64(0), UInt64(0), UInt64(0)) // DescriptorPacket.size bytes
            guard let packet = try? withUnsafeMutableBytes(of: &buffer, { bytes throws(SystemCallError) in
                try Kernel.receiveWithDescriptors(socket, into: bytes)
            }), packet.byteCount > 0 else { return nil } // none queued, or closed
            let bytes = withUnsafeBytes(of: &buffer) { Array($0.prefix(packet.byteCount)) }
            if bytes == DescriptorPacket.welcome { isWelcomed = true }
            if bytes == DescriptorPacket.doorbell(token), packet.descriptors.count == 1,
               let status = try? Kernel.status(packet.descriptors[0]), status.st_mode & S_IFMT == S_IFSOCK {
                return packet.descriptors[0]
            }
            packet.descriptors.forEach(Kernel.close)
        }
    }

    /// Whether this sender was made by another process (this one is its forked child).
    /// No system call (`ProcessIdentity`): checked before every write into a shared ring.
    package var isForkedCopy: Bool { ProcessIdentity.current != owner }

    /// Whether the port closed the connection (its owner ended or was killed): nothing sent
    /// here reaches a port any more.
    package var isClosedByPort: Bool {
        (try? Kernel.hungUp([socket]))?.isEmpty == false
    }

    /// Sends `descriptors` (1–253; they stay the caller's) under a fresh token, which the
    /// message's descriptor components then name. When the connection's send buffer is
    /// full (the receiver is behind by that many packets), waits for room until `deadline`
    /// (`wouldBlock` after it; at once for the default, a deadline already past).
    package func attach(_ descriptors: [Int32], before deadline: Deadline = Deadline(rawValue: 0)) throws(DescriptorSendError) -> DescriptorToken {
        try attach(descriptors, as: .random(), before: deadline)
    }

    /// `attach(_:before:)` under `token`, chosen by the caller (a shared ring's, which its
    /// notes name).
    package func attach(_ descriptors: [Int32], as token: DescriptorToken,
                        before deadline: Deadline = Deadline(rawValue: 0)) throws(DescriptorSendError) -> DescriptorToken {
        precondition(!descriptors.isEmpty && descriptors.count <= Kernel.maxDescriptorsPerPacket)
        while true {
            do {
                try send(.attach, token, descriptors)
                return token
            } catch .wouldBlock {
                let now = Deadline.now()
                guard now < deadline else { throw .wouldBlock }
                do {
                    _ = try Kernel.waitUntilWritable(socket, timeout: min(deadline - now, .milliseconds(100)))
                } catch {
                    throw .system(error)
                }
            }
        }
    }

    /// Tells the receiver that the message of `token` was not sent after all: it closes
    /// that token's descriptors. Best effort: a receiver that does not read drops them
    /// when the connection closes (`DescriptorReceiver.closeOrphans`).
    package func revoke(_ token: DescriptorToken) {
        try? send(.revoke, token, [])
    }

    private func send(_ operation: DescriptorPacket.Operation, _ token: DescriptorToken,
                      _ descriptors: [Int32]) throws(DescriptorSendError) {
        guard getpid() == owner else { throw .forkedChild }
        let packet = DescriptorPacket.encode(operation, token)
        let sent: Bool
        do throws(SystemCallError) {
            sent = try packet.withUnsafeBufferPointer { bytes throws(SystemCallError) in
                try Kernel.sendWithDescriptors(socket, UnsafeRawBufferPointer(bytes), descriptors: descriptors)
            }
        } catch {
            throw .system(error)
        }
        if !sent { throw .wouldBlock }
    }
}
