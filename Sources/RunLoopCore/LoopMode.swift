/// The name of a run-loop mode: the set of sources, timers and observers a run services.
///
/// A run loop runs in one mode at a time and services only that mode's items; events for
/// items of other modes are held until the loop runs in one of their modes.
public struct LoopMode: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let rawValue: String

    @inlinable public init(rawValue: String) { self.rawValue = rawValue }
    @inlinable public init(_ name: String) { self.rawValue = name }
    @inlinable public init(stringLiteral name: String) { self.rawValue = name }

    /// The mode for most work (`kCFRunLoopDefaultMode`).
    @inlinable public static var `default`: LoopMode { LoopMode("default") }

    /// The common modes (`kCFRunLoopCommonModes`): an item added here is in every mode of
    /// the loop's common set, including modes added to the set later. A loop cannot run
    /// in `.common` itself; it runs in one of the set's modes.
    @inlinable public static var common: LoopMode { LoopMode("common") }

    public var description: String { rawValue }
}
