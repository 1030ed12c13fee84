import RunLoopCore
import RunLoopSystem
import RunLoopZMQ

/// Errors of port operations, and of the check-in that starts a pool.
///
/// One of RunLoopKit's three error types, with `RunLoopError` (loops and workers) and
/// `SystemCallError` (a call into the kernel or libzmq, which `.system` carries here).
public enum PortError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The peer did not take the message before the deadline (it is gone, not yet there,
    /// or its queue is at its high-water mark). The message was not sent.
    case sendTimedOut(PortAddress)
    /// No reply arrived before the receive timeout.
    case receiveTimedOut(PortAddress)
    /// The remote port's handler threw while handling the request: `reason` is what the
    /// port said of the error (its description, at most 1,024 bytes of UTF-8).
    case remoteHandlerFailed(PortAddress, reason: String)
    /// The port at this address is gone: it was invalidated, or its owner process died
    /// (known for ports of this host), or its connection was lost (a peer over tcp that
    /// stopped answering heartbeats). A request outstanding to it fails with this at once.
    case remoteInvalid(PortAddress)
    /// The remote port's server let go of the request's reply right without replying
    /// (`ReplyRight`'s drop; Mach's send-once notification): reported at once, never as a timeout.
    case noReply(PortAddress)
    /// The name is held by a live port, in this process or another: the holder's pid
    /// (this process's own for a port of its own), or nil if it could not be read.
    case nameInUse(String, holder: Int32?)
    /// No live port is registered under the name.
    case nameNotFound(String)
    /// The name is not a valid port name (see `PortName`).
    case invalidName(String, reason: String)
    /// The address is not a valid `inproc://`, `ipc://` or `tcp://` endpoint.
    case invalidAddress(String)
    /// A CURVE key is not 40 characters of Z85 (see `PortKeyPair`).
    case invalidKey(String)
    /// The security handshake with the peer failed (a CURVE port and no key or a wrong
    /// key, or the reverse): reported as soon as libzmq reports it, not at the deadline.
    case authenticationFailed(PortAddress, HandshakeFailure)
    /// The port refused this client in the security handshake (ZAP status 400): its CURVE
    /// key is not on the port's allow-list (see `PortClientAllowList`). Reported as soon as
    /// libzmq reports it, not at the deadline; the port's handler never saw the message.
    case notAuthorized(PortAddress)
    /// Binding `endpoint` would open the port to the network without CURVE: refused unless
    /// the port requires CURVE, the address is a loopback one, or the caller passes
    /// `insecure: true` (see `LocalPort.bind(tcp:insecure:)`).
    case insecureBind(String)
    /// A key file or key directory is unsafe (a secret key readable by others, a directory
    /// others may write to, not ours) or unreadable: `reason` says which.
    case keyFileUnsafe(path: String, reason: String)
    /// The port was invalidated.
    case invalidated
    /// The runtime directory for named ports is missing, not ours, or open to others.
    case runtimeDirectoryUnsafe(path: String, reason: String)
    /// Not every worker of a pool checked in before the timeout; the pool stopped those that did start.
    case checkInTimedOut(expected: Int, checkedIn: Int)
    /// A call into the kernel or libzmq failed.
    case system(SystemCallError)
    /// A data component of `size` bytes is over the wire format's `limit` per frame
    /// (64 MiB, `docs/wire-format.md`), which a receiving port refuses. Not sent.
    case messageTooLarge(size: Int, limit: Int)
    /// A message with descriptors to a tcp address: descriptors reach processes of this
    /// host only, over a named port (ipc). Refused before anything was sent.
    case descriptorsToAnotherHost(PortAddress)
    /// A message's descriptors could not be sent (`reason`): the port has no descriptor
    /// channel (an unnamed port, a foreign one), its descriptor queue is full (it does not
    /// read), a descriptor was already taken or closed, or more than 253. Nothing was sent.
    case descriptorsNotSent(PortAddress, reason: String)

    public var description: String {
        switch self {
        case .sendTimedOut(let address): "send to \(address) timed out: the peer did not take the message"
        case .receiveTimedOut(let address): "no reply from \(address) before the receive timeout"
        case .remoteHandlerFailed(let address, let reason): "the handler of \(address) failed: \(reason)"
        case .remoteInvalid(let address): "the port at \(address) is gone (invalidated, or its owner died)"
        case .noReply(let address): "the server at \(address) let go of the request without replying"
        case .nameInUse(let name, let holder):
            "the port name '\(name)' is held by a live port\(holder.map { " (process \($0))" } ?? "")"
        case .nameNotFound(let name): "no live port is registered as '\(name)'"
        case .invalidName(let name, let reason): "invalid port name '\(name)': \(reason)"
        case .invalidAddress(let address): "invalid port address '\(address)'"
        case .invalidKey(let reason): "invalid CURVE key: \(reason)"
        case .authenticationFailed(let address, let failure): "the security handshake with \(address) failed: \(failure)"
        case .notAuthorized(let address): "the port at \(address) refused this client: its key is not on the port's allow-list"
        case .insecureBind(let endpoint):
            "binding \(endpoint) without CURVE would let anyone who reaches it send to the port: call requireCurve first, bind a loopback address, or pass insecure: true"
        case .keyFileUnsafe(let path, let reason): "unsafe key file \(path): \(reason)"
        case .invalidated: "the port was invalidated"
        case .runtimeDirectoryUnsafe(let path, let reason): "unsafe runtime directory \(path): \(reason)"
        case .checkInTimedOut(let expected, let checkedIn):
            "only \(checkedIn) of \(expected) workers checked in before the timeout"
        case .system(let error): "\(error)"
        case .messageTooLarge(let size, let limit):
            "a data component of \(size) bytes is over the wire limit of \(limit) bytes per frame: not sent"
        case .descriptorsToAnotherHost(let address):
            "descriptors reach processes of this host only (a named port), not \(address): not sent"
        case .descriptorsNotSent(let address, let reason): "descriptors for \(address) not sent: \(reason)"
        }
    }

    /// Why a security handshake failed, as libzmq's socket monitor reported it.
    public struct HandshakeFailure: Sendable, Equatable, CustomStringConvertible {
        /// What went wrong, in words (a CURVE port and a client without its key, a wrong
        /// server key, a refused authentication).
        public let description: String

        init(_ failure: ZMQHandshakeFailure) {
            description = failure.description
        }
    }
}

extension PortError {
    /// The error for a failed security handshake: `notAuthorized` when the port's ZAP
    /// handler refused the client (status 400), else `authenticationFailed`.
    static func handshakeFailed(_ address: PortAddress, _ failure: ZMQHandshakeFailure) -> PortError {
        failure.isAuthorizationDenied ? .notAuthorized(address) : .authenticationFailed(address, HandshakeFailure(failure))
    }

    /// Logs a send or reply timeout at `.debug`, and returns it to be thrown.
    static func loggedTimeout(_ error: PortError) -> PortError {
        RunLoopKitLog.port.debug("timed out", metadata: ["error": "\(error)"])
        return error
    }
}

/// Runs ZeroMQ or system calls as one step of a port operation: their error becomes
/// `PortError.system`.
@inline(__always)
func asPortError<T>(_ body: () throws(SystemCallError) -> T) throws(PortError) -> T {
    do {
        return try body()
    } catch {
        throw .system(error)
    }
}
