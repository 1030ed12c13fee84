import Glibc

/// An error from a Linux system call, with the name of the call that failed and its `errno`.
public struct SystemCallError: Error, Equatable, CustomStringConvertible, Sendable {
    /// The system call that failed, for example `"epoll_ctl"`.
    public let call: String
    /// The `errno` read at the failure point.
    public let errno: Int32

    @usableFromInline package init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    public var description: String {
        "\(call) failed: \(String(cString: strerror(errno))) (errno \(errno))"
    }
}

/// Runs a system call that returns -1 and sets `errno` on failure, retrying on `EINTR`.
///
/// Every system call RunLoopKit makes goes through here, so that `errno` is read at
/// the failure point and an interrupted call is never mistaken for a failure.
@inlinable @inline(__always)
@discardableResult
package func systemCall<T: FixedWidthInteger>(_ name: @autoclosure () -> String, _ body: () -> T) throws(SystemCallError) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = Glibc.errno
        if code == EINTR { continue }
        throw SystemCallError(call: name(), errno: code)
    }
}
