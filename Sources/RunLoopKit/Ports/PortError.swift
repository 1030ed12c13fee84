import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
/// Errors of port operations.
public enum PortError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The peer did not take the message before the deadline (it is gone, not yet there,
    /// or its queue is at its high-water mark). The message was not sent.
    case sendTimedOut(PortAddress)
    /// No reply arrived before the receive timeout.
    case receiveTimedOut(PortAddress)
    /// The port at this address was invalidated (known for ports of this process).
    case remoteInvalid(PortAddress)
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
    case authenticationFailed(PortAddress, ZMQHandshakeFailure)
    /// The port was invalidated.
    case invalidated
    /// The runtime directory for named ports is missing, not ours, or open to others.
    case runtimeDirectoryUnsafe(path: String, reason: String)
    /// ZeroMQ refused an operation.
    case transport(ZMQError)
    /// A system call failed.
    case system(SystemCallError)

    public var description: String {
        switch self {
        case .sendTimedOut(let address): "send to \(address) timed out: the peer did not take the message"
        case .receiveTimedOut(let address): "no reply from \(address) before the receive timeout"
        case .remoteInvalid(let address): "the port at \(address) was invalidated"
        case .nameInUse(let name, let holder):
            "the port name '\(name)' is held by a live port\(holder.map { " (process \($0))" } ?? "")"
        case .nameNotFound(let name): "no live port is registered as '\(name)'"
        case .invalidName(let name, let reason): "invalid port name '\(name)': \(reason)"
        case .invalidAddress(let address): "invalid port address '\(address)'"
        case .invalidKey(let reason): "invalid CURVE key: \(reason)"
        case .authenticationFailed(let address, let failure): "the security handshake with \(address) failed: \(failure)"
        case .invalidated: "the port was invalidated"
        case .runtimeDirectoryUnsafe(let path, let reason): "unsafe runtime directory \(path): \(reason)"
        case .transport(let error): "ZeroMQ: \(error)"
        case .system(let error): "\(error)"
        }
    }
}

extension PortError {
    /// Logs a send or reply timeout at `.debug`, and returns it to be thrown.
    static func loggedTimeout(_ error: PortError) -> PortError {
        RunLoopKitLog.port.debug("timed out", metadata: ["error": "\(error)"])
        return error
    }
}

/// Runs ZeroMQ calls as one step of a port operation: a `ZMQError` becomes
/// `PortError.transport`.
@inline(__always)
func transport<T>(_ body: () throws(ZMQError) -> T) throws(PortError) -> T {
    do {
        return try body()
    } catch {
        throw .transport(error)
    }
}

/// Runs a port operation whose steps throw ZeroMQ's errors or port errors, as one
/// typed-throws call: a `ZMQError` becomes `PortError.transport`.
@inline(__always)
func portOperation<T>(_ body: () throws -> T) throws(PortError) -> T {
    do {
        return try body()
    } catch let error as PortError {
        throw error
    } catch let error as ZMQError {
        throw .transport(error)
    } catch {
        preconditionFailure("a port operation threw \(error), which is neither a PortError nor a ZMQError")
    }
}
