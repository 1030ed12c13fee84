import RunLoopSystem
import CZeroMQ
import Glibc

/// An error from a ZeroMQ call, with the name of the call that failed and its error code.
public struct ZMQError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A ZeroMQ error code: an `errno` value, one of ZeroMQ's own codes (such as `ETERM`),
    /// or a negative code that RunLoopKit defines (never an `errno` value).
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: Int32

        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// `EAGAIN`: the operation would block (non-blocking mode) or timed out.
        public static let again = Code(rawValue: EAGAIN)
        /// `EINTR`: interrupted by a signal. `zmqCall` retries these, so callers rarely see it.
        public static let interrupted = Code(rawValue: EINTR)
        /// `ETERM`: the socket's context was shut down or terminated.
        public static let terminated = Code(rawValue: ETERM)
        /// `ENOTSOCK`: the socket handle is invalid (already closed).
        public static let notSocket = Code(rawValue: ENOTSOCK)
        /// `EINVAL`: an invalid argument, such as a malformed endpoint or option value.
        public static let invalidArgument = Code(rawValue: EINVAL)
        /// `EFAULT`: a null or invalid pointer, such as a context that was terminated.
        public static let badAddress = Code(rawValue: EFAULT)
        /// `EADDRINUSE`: the endpoint is already bound.
        public static let addressInUse = Code(rawValue: EADDRINUSE)
        /// `EADDRNOTAVAIL`: the endpoint names an address that is not local.
        public static let addressNotAvailable = Code(rawValue: EADDRNOTAVAIL)
        /// `EPROTONOSUPPORT`: the endpoint's transport is unknown (`bogus://x`).
        public static let protocolNotSupported = Code(rawValue: EPROTONOSUPPORT)
        /// `ENOTSUP`: the operation is not supported by this socket type or build of libzmq.
        public static let notSupported = Code(rawValue: ENOTSUP)
        /// `ENOCOMPATPROTO`: the transport does not fit the socket type.
        public static let incompatibleProtocol = Code(rawValue: ENOCOMPATPROTO)
        /// `EFSM`: the socket is in the wrong state for the operation (REQ/REP order).
        public static let wrongState = Code(rawValue: EFSM)
        /// `ENODEV`: a tcp endpoint names an interface or address that does not exist.
        public static let noSuchDevice = Code(rawValue: ENODEV)
        /// `ECONNREFUSED`: the peer refused the connection.
        public static let connectionRefused = Code(rawValue: ECONNREFUSED)
        /// `ENOENT`: an ipc path does not exist, or `unbind`/`disconnect` of an endpoint
        /// the socket is not bound or connected to.
        public static let fileNotFound = Code(rawValue: ENOENT)
        /// `EMFILE`: the process or the context ran out of descriptors or sockets.
        public static let tooManyOpenFiles = Code(rawValue: EMFILE)
        /// `EHOSTUNREACH`: the message cannot be routed (for example a ROUTER's unknown peer).
        public static let hostUnreachable = Code(rawValue: EHOSTUNREACH)
        /// `EMSGSIZE`: the message is too large.
        public static let messageTooLarge = Code(rawValue: EMSGSIZE)
        /// `ENOMEM`: libzmq could not allocate memory.
        public static let outOfMemory = Code(rawValue: ENOMEM)

        /// RunLoopKit's own code: a received message had more frames than the receiver
        /// accepts. The whole message was drained and discarded; the socket is usable.
        public static let tooManyFrames = Code(rawValue: -1)

        public var description: String {
            switch self {
            case .tooManyFrames: "message has too many frames"
            default: String(cString: zmq_strerror(rawValue))
            }
        }
    }

    /// The error code read from `zmq_errno()` at the failure point.
    public let code: Code
    /// The ZeroMQ function that failed, for example `"zmq_bind"`.
    public let call: String

    public init(code: Code, call: String) {
        self.code = code
        self.call = call
    }

    public var description: String {
        "\(call) failed: \(code) (code \(code.rawValue))"
    }
}

/// Runs a ZeroMQ call that returns -1 and sets `zmq_errno()` on failure, retrying on `EINTR`.
///
/// Every ZeroMQ call RunLoopKit makes goes through this layer, so that the error is read
/// at the failure point (before any other call can overwrite it) and a call interrupted
/// by a signal is never mistaken for a failure. `body` must be safe to call again.
@inline(__always)
@discardableResult
@inlinable
package func zmqCall(_ name: String, _ body: () -> Int32) throws(ZMQError) -> Int32 {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = zmq_errno()
        if code == EINTR { continue }
        throw ZMQError(code: ZMQError.Code(rawValue: code), call: name)
    }
}

/// Runs a ZeroMQ call like `zmqCall`, but returns `nil` instead of throwing when it fails
/// with `EAGAIN`: for non-blocking sends and receives, where "would block" is an answer,
/// not an error. No error is built or thrown on that path.
@inline(__always)
@inlinable
package func zmqNonBlockingCall(_ name: String, _ body: () -> Int32) throws(ZMQError) -> Int32? {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = zmq_errno()
        if code == EINTR { continue }
        if code == EAGAIN { return nil }
        throw ZMQError(code: ZMQError.Code(rawValue: code), call: name)
    }
}

/// Runs a ZeroMQ call that returns a pointer, or `NULL` and sets `zmq_errno()` on failure.
///
/// Used for `zmq_ctx_new` and `zmq_socket`, which are not retried: they never report `EINTR`.
@inline(__always)
package func zmqCall(_ name: String, _ body: () -> UnsafeMutableRawPointer?) throws(ZMQError) -> UnsafeMutableRawPointer {
    guard let pointer = body() else {
        throw ZMQError(code: ZMQError.Code(rawValue: zmq_errno()), call: name)
    }
    return pointer
}
