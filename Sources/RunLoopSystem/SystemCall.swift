import Glibc

/// An error from a call into the kernel or libzmq: the call that failed and its error
/// code, read at the failure point (`systemCall`, and `zmqCall` in the ZeroMQ layer).
/// RunLoopKit's one error type below ports and loops, as swift-system's `Errno` is.
public struct SystemCallError: Error, Hashable, Sendable, CustomStringConvertible {
    /// An error code: an `errno` value, one of libzmq's own codes (above
    /// `ZMQ_HAUSNUMERO`, such as `ETERM`), or a negative code RunLoopKit defines.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: Int32

        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// `EAGAIN`: the operation would block (non-blocking mode) or timed out.
        public static let again = Code(rawValue: EAGAIN)
        /// `EINTR`: interrupted by a signal. The funnels retry these, so callers rarely see it.
        public static let interrupted = Code(rawValue: EINTR)
        /// `EBADF`: not an open descriptor.
        public static let badDescriptor = Code(rawValue: EBADF)
        /// `EACCES`: permission denied.
        public static let permissionDenied = Code(rawValue: EACCES)
        /// `EPERM`: the operation is not permitted, such as a write to, or growth of, a
        /// memory file sealed against it.
        public static let operationNotPermitted = Code(rawValue: EPERM)
        /// `EBUSY`: the resource is in use, such as a memory file that a shared writable
        /// mapping keeps from being sealed against writes.
        public static let busy = Code(rawValue: EBUSY)
        /// `EEXIST`: the file exists.
        public static let fileExists = Code(rawValue: EEXIST)
        /// `ENOENT`: no such file (an ipc path), or `unbind`/`disconnect` of an endpoint the
        /// socket is not bound or connected to.
        public static let fileNotFound = Code(rawValue: ENOENT)
        /// `ENOTSOCK`: not a socket (a ZeroMQ socket already closed).
        public static let notSocket = Code(rawValue: ENOTSOCK)
        /// `EINVAL`: an invalid argument, such as a malformed endpoint or option value.
        public static let invalidArgument = Code(rawValue: EINVAL)
        /// `EFAULT`: a null or invalid pointer, such as a terminated ZeroMQ context.
        public static let badAddress = Code(rawValue: EFAULT)
        /// `EADDRINUSE`: the endpoint is already bound.
        public static let addressInUse = Code(rawValue: EADDRINUSE)
        /// `EADDRNOTAVAIL`: the endpoint names an address that is not local.
        public static let addressNotAvailable = Code(rawValue: EADDRNOTAVAIL)
        /// `EPROTONOSUPPORT`: the endpoint's transport is unknown (`bogus://x`).
        public static let protocolNotSupported = Code(rawValue: EPROTONOSUPPORT)
        /// `ENOTSUP`: not supported by this socket type, kernel or build of libzmq.
        public static let notSupported = Code(rawValue: ENOTSUP)
        /// `ENOSYS`: the kernel does not have this call.
        public static let notImplemented = Code(rawValue: ENOSYS)
        /// `ENODEV`: a tcp endpoint names an interface or address that does not exist.
        public static let noSuchDevice = Code(rawValue: ENODEV)
        /// `ECONNREFUSED`: the peer refused the connection.
        public static let connectionRefused = Code(rawValue: ECONNREFUSED)
        /// `EMFILE`: the process or the ZeroMQ context ran out of descriptors or sockets.
        public static let tooManyOpenFiles = Code(rawValue: EMFILE)
        /// `ENFILE`: the system ran out of open files (every process's, not this one's limit).
        public static let tooManyOpenFilesInSystem = Code(rawValue: ENFILE)
        /// `EHOSTUNREACH`: the message cannot be routed (a ROUTER's unknown or gone peer).
        public static let hostUnreachable = Code(rawValue: EHOSTUNREACH)
        /// `EMSGSIZE`: the message is too large.
        public static let messageTooLarge = Code(rawValue: EMSGSIZE)
        /// `ENOMEM`: out of memory.
        public static let outOfMemory = Code(rawValue: ENOMEM)
        /// `ESRCH`: no such process (a child already reaped).
        public static let noSuchProcess = Code(rawValue: ESRCH)
        /// `ECHILD`: not a child of this process.
        public static let notAChild = Code(rawValue: ECHILD)

        /// libzmq's `EFSM`: the socket is in the wrong state for the operation (REQ/REP order).
        public static let wrongState = Code(rawValue: hausnumero + 51)
        /// libzmq's `ENOCOMPATPROTO`: the transport does not fit the socket type.
        public static let incompatibleProtocol = Code(rawValue: hausnumero + 52)
        /// libzmq's `ETERM`: the socket's context was shut down or terminated.
        public static let terminated = Code(rawValue: hausnumero + 53)
        /// libzmq's `EMTHREAD`: no I/O thread is available.
        public static let noIOThread = Code(rawValue: hausnumero + 54)

        /// RunLoopKit's own code: a received message had more frames than the receiver
        /// accepts. The whole message was drained and discarded; the socket is usable.
        public static let tooManyFrames = Code(rawValue: -1)
        /// RunLoopKit's own code: a ZeroMQ context made by another process was used, in a
        /// child that process forked. libzmq's state does not survive a fork (it answers
        /// every call that needs its threads with `EINTR`), so the call fails at once.
        public static let forkedChild = Code(rawValue: -2)

        /// `ZMQ_HAUSNUMERO`, where libzmq's own codes start (`zmq.h`).
        private static let hausnumero: Int32 = 156_384_712

        public var description: String {
            switch self {
            case .tooManyFrames: "message has too many frames"
            case .forkedChild: "a ZeroMQ context used in a forked child (its parent made it)"
            case .wrongState: "Operation cannot be accomplished in current state"
            case .incompatibleProtocol: "The protocol is not compatible with the socket type"
            case .terminated: "Context was terminated"
            case .noIOThread: "No thread available"
            default: String(cString: strerror(rawValue))
            }
        }
    }

    /// The call that failed, for example `"epoll_ctl"` or `"zmq_bind"`.
    public let call: String
    /// The error code read at the failure point.
    public let code: Code

    @usableFromInline package init(code: Code, call: String) {
        self.code = code
        self.call = call
    }

    @usableFromInline package init(call: String, errno: Int32) {
        self.init(code: Code(rawValue: errno), call: call)
    }

    /// The code's number (`errno`, or libzmq's).
    public var errno: Int32 { code.rawValue }

    public var description: String {
        // A negative code is RunLoopKit's own, never an errno.
        "\(call) failed: \(code) (\(code.rawValue < 0 ? "code" : "errno") \(code.rawValue))"
    }
}

/// Runs a system call that returns -1 and sets `errno` on failure, retrying on `EINTR`.
///
/// Every system call RunLoopKit makes goes through here, so that `errno` is read at
/// the failure point and an interrupted call is never mistaken for a failure. Debug
/// builds let tests fail chosen attempts (`ErrnoInjection`); release builds have no such check.
@inlinable @inline(__always)
@discardableResult
package func systemCall<T: FixedWidthInteger>(_ name: @autoclosure () -> String, _ body: () -> T) throws(SystemCallError) -> T {
    while true {
        #if ERRNO_INJECTION
        let result: T
        if let forced = injectedErrno(name) {
            Glibc.errno = forced
            result = -1
        } else {
            result = body()
        }
        #else
        let result = body()
        #endif
        if result != -1 { return result }
        let code = Glibc.errno
        if code == EINTR { continue }
        throw SystemCallError(call: name(), errno: code)
    }
}
