import Glibc

/// A point in time on the monotonic clock (`CLOCK_MONOTONIC`), in nanoseconds.
///
/// Run loops schedule on this clock so that wall-clock changes never make a timer
/// fire early or late.
public struct Deadline: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Nanoseconds since an unspecified point (the boot of the machine, on Linux).
    public let rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// The current time, from `clock_gettime(CLOCK_MONOTONIC)`.
    @inlinable public static func now() -> Deadline {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Deadline(rawValue: UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec))
    }

    /// A deadline that never arrives. Computed and inlinable, not a stored global: the loop
    /// compares with it several times a pass, and a global's each read calls its accessor.
    @inlinable public static var distantFuture: Deadline { Deadline(rawValue: UInt64.max) }

    /// The deadline `duration` from now.
    public static func after(_ duration: Duration) -> Deadline { .now() + duration }

    @inlinable public static func < (lhs: Deadline, rhs: Deadline) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Adds a duration, saturating at `distantFuture` and at zero.
    public static func + (lhs: Deadline, rhs: Duration) -> Deadline {
        let delta = rhs.totalNanoseconds
        if delta >= 0 {
            let (sum, overflow) = lhs.rawValue.addingReportingOverflow(UInt64(delta))
            return Deadline(rawValue: overflow ? .max : sum)
        }
        let magnitude = UInt64(delta.magnitude)
        return Deadline(rawValue: lhs.rawValue > magnitude ? lhs.rawValue - magnitude : 0)
    }

    /// The signed time from `rhs` to `lhs`.
    public static func - (lhs: Deadline, rhs: Deadline) -> Duration {
        if lhs >= rhs { return .nanoseconds(Int64(clamping: lhs.rawValue - rhs.rawValue)) }
        return .nanoseconds(-Int64(clamping: rhs.rawValue - lhs.rawValue))
    }

    public var description: String {
        self == .distantFuture ? "distant future" : "\(Double(rawValue) / 1e9)s"
    }
}

extension Duration {
    /// The duration in whole nanoseconds (toward zero), saturating at `Int64`'s bounds.
    /// From `attoseconds`, one division, not `components`: a request computes a deadline
    /// from a duration every time (hot-path: cheap-primitive (docs/optimization-tips.md)).
    package var totalNanoseconds: Int64 {
        let attoseconds = self.attoseconds
        // Up to 18 s either way (every default timeout) the magnitude fits 64 bits, whose
        // division by a constant is a multiplication; beyond, the 128-bit division.
        let magnitude = attoseconds.magnitude
        guard magnitude >> 64 == 0 else { return Int64(clamping: attoseconds / 1_000_000_000) }
        let nanoseconds = Int64(UInt64(truncatingIfNeeded: magnitude) / 1_000_000_000)
        return attoseconds < 0 ? -nanoseconds : nanoseconds
    }
}
