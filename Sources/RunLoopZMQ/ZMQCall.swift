import RunLoopSystem
import CZeroMQ
import Glibc
import Synchronization

/// Runs a ZeroMQ call that returns -1 and sets `zmq_errno()` on failure, retrying on `EINTR`.
///
/// Every ZeroMQ call RunLoopKit makes goes through this layer, so that the error is read
/// at the failure point (before any other call can overwrite it) and a call interrupted
/// by a signal is never mistaken for a failure. `body` must be safe to call again.
///
/// In a child forked from the process that made a context, libzmq answers every call that
/// needs its threads with `EINTR`, for ever: there, `EINTR` throws `forkedChild` instead
/// of being retried (`zmqInterrupted`). Only that path asks for the pid.
@inline(__always)
@discardableResult
@inlinable
package func zmqCall(_ name: String, _ body: () -> Int32) throws(SystemCallError) -> Int32 {
    while true {
        let result = attempt(name, body)
        if result != -1 { return result }
        let code = zmq_errno()
        if code == EINTR { try zmqInterrupted(name); continue }
        throw SystemCallError(code: SystemCallError.Code(rawValue: code), call: name)
    }
}

/// Runs a ZeroMQ call like `zmqCall`, but returns `nil` instead of throwing when it fails
/// with `EAGAIN`: for non-blocking sends and receives, where "would block" is an answer,
/// not an error. No error is built or thrown on that path.
@inline(__always)
@inlinable
package func zmqNonBlockingCall(_ name: String, _ body: () -> Int32) throws(SystemCallError) -> Int32? {
    while true {
        let result = attempt(name, body)
        if result != -1 { return result }
        let code = zmq_errno()
        if code == EINTR { try zmqInterrupted(name); continue }
        if code == EAGAIN { return nil }
        throw SystemCallError(code: SystemCallError.Code(rawValue: code), call: name)
    }
}

/// Runs a ZeroMQ call that returns a pointer, or `NULL` and sets `zmq_errno()` on failure.
///
/// Used for `zmq_ctx_new` and `zmq_socket`, which are not retried: they never report `EINTR`.
@inline(__always)
package func zmqCall(_ name: String, _ body: () -> UnsafeMutableRawPointer?) throws(SystemCallError) -> UnsafeMutableRawPointer {
    #if ERRNO_INJECTION
    if let forced = injectedErrno({ name }) {
        throw SystemCallError(code: SystemCallError.Code(rawValue: forced), call: name)
    }
    #endif
    guard let pointer = body() else {
        throw SystemCallError(code: SystemCallError.Code(rawValue: zmq_errno()), call: name)
    }
    return pointer
}

/// One attempt of a ZeroMQ call: `body()`, or in debug builds the failure a test forces
/// (`ErrnoInjection`: -1 with `errno`, which `zmq_errno()` reads, set; the call not made).
@inlinable @inline(__always)
func attempt(_ name: String, _ body: () -> Int32) -> Int32 {
    #if ERRNO_INJECTION
    if let forced = injectedErrno({ name }) {
        errno = forced
        return -1
    }
    #endif
    return body()
}

/// The pid of the process that made this process image's first ZeroMQ context (0 before
/// any): in a child it forked, the contexts it inherited are its parent's.
package let zmqContextProcess = Atomic<Int32>(0)

/// A ZeroMQ call failed with `EINTR`: returns to retry it, or throws `forkedChild` if this
/// process is a child forked after a context was made (libzmq would answer `EINTR` for
/// ever). Out of line: the calls' fast path never asks for the pid.
@usableFromInline @inline(never)
package func zmqInterrupted(_ name: String) throws(SystemCallError) {
    let maker = zmqContextProcess.load(ordering: .relaxed)
    if maker != 0 && maker != getpid() { throw SystemCallError(code: .forkedChild, call: name) }
}
