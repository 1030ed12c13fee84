import RunLoopZMQ
import Glibc

/// Who sent a message a port received, as its connection proved it (`LoopMessage.sender`).
///
/// Known for a connection to a CURVE port (the key its handshake proved the client holds,
/// as the port's own ZAP policy admitted it) and for an ipc connection to a named port
/// without CURVE (the process the kernel saw connect, `SO_PEERCRED`); unknown (nil) for
/// messages from this process (inproc) and over tcp without CURVE, where an address would
/// prove nothing. Never taken from what a peer claims in its handshake. See `docs/security.md`.
public enum MessageSender: Sendable, Hashable, CustomStringConvertible {
    /// A CURVE client, by its long-term public key in Z85: the key its handshake proved it
    /// holds (the "User-Id" the port's own ZAP policy gave the connection).
    case curveKey(String)
    /// A process on this machine that connected over ipc: its user, group and process ids
    /// when it connected, as the kernel gave them. The pid names that process only while
    /// it lives: once it exits, the pid may be given to another (docs/security.md).
    case process(uid: UInt32, gid: UInt32, pid: Int32)

    public var description: String {
        switch self {
        case .curveKey(let key): "CURVE key \(key)"
        case .process(let uid, let gid, let pid): "process \(pid) (uid \(uid), gid \(gid))"
        }
    }

    /// The sender a CURVE port's ZAP policy named as the connection's "User-Id": a client's
    /// key, if the text is one (40 characters of Z85 that decode); nil for any other text.
    static func curveKey(fromUserID text: some Collection<UInt8>) -> MessageSender? {
        guard text.count == ZMQCurveKey.z85Count else { return nil }
        let z85 = String(decoding: text, as: UTF8.self)
        guard let key = ZMQCurveKey(z85: z85), key.z85 == z85 else { return nil }
        return .curveKey(z85)
    }

    /// The sender in libzmq's "Peer-Address" of an ipc connection, which ends with
    /// ":uid:gid:pid" from `SO_PEERCRED` (`localhost:1000:1000:4242`); nil for any other
    /// text. An IPv4 address has no colon, and an IPv6 address with exactly three colons
    /// has an empty group, so neither can pass for one.
    static func process(fromPeerAddress text: some Collection<UInt8>) -> MessageSender? {
        let fields = text.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        guard fields.count == 4,
              let uid = UInt32(decimal: fields[1]), let gid = UInt32(decimal: fields[2]),
              let pid = UInt32(decimal: fields[3]), pid <= Int32.max
        else { return nil }
        return .process(uid: uid, gid: gid, pid: Int32(pid))
    }
}

private extension UInt32 {
    /// A non-empty run of decimal digits that fits.
    init?(decimal digits: some Collection<UInt8>) {
        guard !digits.isEmpty, digits.count <= 10 else { return nil }
        var value: UInt64 = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + UInt64(digit - UInt8(ascii: "0"))
        }
        guard let fitting = UInt32(exactly: value) else { return nil }
        self = fitting
    }
}

/// A `MessageSender` by reference, as a message carries it (`LoopMessage.senderBox`).
final class MessageSenderBox: Sendable {
    let sender: MessageSender
    init(_ sender: MessageSender) { self.sender = sender }
}

/// Reads the sender of the message a port's socket just received, from the metadata libzmq
/// attaches to every frame of a tcp or ipc connection (`zmq_msg_gets`), and only from what
/// the connection proved:
///
/// - a port that requires CURVE (`readsCurveKey`) reads "User-Id" alone: the port's own ZAP
///   policy gave it (each CURVE port has its own ZAP domain, and libzmq puts a ZAP reply's
///   user id before any property the peer offers), and only 40 characters of Z85 that decode
///   make a `.curveKey`;
/// - a named port without CURVE (`readsProcess`) reads "Peer-Address" alone, which libzmq
///   sets from the kernel (`SO_PEERCRED` on ipc) before any property the peer offers;
/// - any other port (inproc and plain tcp only) reads nothing. "User-Id" is never read on
///   a port without CURVE: there a peer's own READY command sets it (docs/security.md).
///
/// Cost: nothing for a port that reads nothing. Otherwise an inproc frame has no metadata,
/// so that is one call that returns at once; a tcp or ipc message costs one lookup in its
/// connection's small property map and a comparison with the text last seen; only a text
/// not seen last (another connection) is parsed and makes a new `MessageSender`. The
/// comparison is of the text itself, so a new connection is never taken for the previous one.
///
/// Owner thread of the port only, like its socket.
struct MessageSenderReader {
    private var lastText: [UInt8] = []
    private var last: MessageSenderBox?
    /// Whether the port requires CURVE, its clients admitted by its own ZAP policy: the
    /// sender is the key that policy gave as user id. Set before the port has endpoints.
    var readsCurveKey = false
    /// Whether the port has an ipc endpoint (it is named): without CURVE, its ipc peers are
    /// known by the kernel's credentials.
    var readsProcess = false

    /// The sender, boxed once per connection seen (see `LoopMessage.senderBox`).
    ///
    /// `frame` is one the connection's engine received, which carries the connection's
    /// metadata: the message's last frame. (A ROUTER socket's routing-id frame, frame 0, has
    /// it only when libzmq did not prefetch the message: it has none for every message of a
    /// burst but the first, as libzmq 4.3.4 does it.)
    mutating func sender(ofReceived socket: ZMQSocket, frame: Int) -> MessageSenderBox? {
        if readsCurveKey {
            guard let userID = socket.receivedProperty("User-Id", ofFrame: frame) else { return nil } // inproc
            return remembered(userID) { MessageSender.curveKey(fromUserID: $0) }
        }
        guard readsProcess, let peer = socket.receivedProperty("Peer-Address", ofFrame: frame) else { return nil }
        return remembered(peer) { MessageSender.process(fromPeerAddress: $0) }
    }

    private mutating func remembered(_ text: UnsafePointer<CChar>,
                                     _ make: (UnsafeRawBufferPointer) -> MessageSender?) -> MessageSenderBox? {
        let bytes = UnsafeRawBufferPointer(start: text, count: strlen(text))
        if bytes.elementsEqual(lastText) { return last }
        last = make(bytes).map(MessageSenderBox.init)
        lastText = Array(bytes)
        return last
    }
}
