import RunLoopSystem
import CZeroMQ

/// Facts about the libzmq the process is linked against.
package enum ZMQ {
    /// A libzmq version, such as 4.3.4.
    package struct Version: Comparable, Sendable, CustomStringConvertible {
        var major: Int32
        var minor: Int32
        var patch: Int32

        package static func < (lhs: Version, rhs: Version) -> Bool {
            (lhs.major, lhs.minor, lhs.patch) < (rhs.major, rhs.minor, rhs.patch)
        }

        package var description: String { "\(major).\(minor).\(patch)" }
    }

    /// The version of the libzmq loaded at run time (not the headers'), via `zmq_version`.
    package static var version: Version {
        var version = Version(major: 0, minor: 0, patch: 0)
        zmq_version(&version.major, &version.minor, &version.patch)
        return version
    }

    /// Whether libzmq was built with a capability, via `zmq_has`: a transport (`"ipc"`,
    /// `"pgm"`, `"tipc"`, `"norm"`) or a security mechanism (`"curve"`, `"gssapi"`).
    package static func has(_ capability: String) -> Bool {
        zmq_has(capability) == 1
    }
}

extension Duration {
    /// The duration in whole milliseconds, the unit of libzmq's timeouts: rounded up (so a
    /// wait is never shorter than asked), saturating, and never negative.
    package var zmqMilliseconds: Int64 {
        let nanoseconds = max(0, totalNanoseconds)
        return nanoseconds / 1_000_000 + (nanoseconds % 1_000_000 == 0 ? 0 : 1)
    }
}
