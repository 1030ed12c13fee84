import RunLoopSystem
import CZeroMQ
import Glibc

/// Runs a ZeroMQ call that returns -1 and sets `zmq_errno()` on failure, retrying on `EINTR`.
///
/// Every ZeroMQ call RunLoopKit makes goes through this layer, so that the error is read
/// at the failure point (before any other call can overwrite it) and a call interrupted
/// by a signal is never mistaken for a failure. `body` must be safe to call again.
@inline(__always)
@discardableResult
@inlinable
package func zmqCall(_ name: String, _ body: () -> Int32) throws(SystemCallError) -> Int32 {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = zmq_errno()
        if code == EINTR { continue }
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
        let result = body()
        if result != -1 { return result }
        let code = zmq_errno()
        if code == EINTR { continue }
        if code == EAGAIN { return nil }
        throw SystemCallError(code: SystemCallError.Code(rawValue: code), call: name)
    }
}

/// Runs a ZeroMQ call that returns a pointer, or `NULL` and sets `zmq_errno()` on failure.
///
/// Used for `zmq_ctx_new` and `zmq_socket`, which are not retried: they never report `EINTR`.
@inline(__always)
package func zmqCall(_ name: String, _ body: () -> UnsafeMutableRawPointer?) throws(SystemCallError) -> UnsafeMutableRawPointer {
    guard let pointer = body() else {
        throw SystemCallError(code: SystemCallError.Code(rawValue: zmq_errno()), call: name)
    }
    return pointer
}
