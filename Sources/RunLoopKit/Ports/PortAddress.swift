import RunLoopWire

/// Where a port receives: a ZeroMQ endpoint (`inproc://`, `ipc://` or `tcp://`).
///
/// Port components of messages travel as these addresses; whoever receives one can send there.
public struct PortAddress: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    /// Whether the address is `inproc://`, decided once: every send asks.
    let isInProcess: Bool

    /// Accepts a valid endpoint only; nil otherwise.
    public init?(rawValue: String) {
        guard WireCodec.isValidAddress(rawValue) else { return nil }
        self.init(unchecked: rawValue)
    }

    /// Validates an endpoint string, throwing `PortError.invalidAddress`.
    public init(validating string: String) throws(PortError) {
        guard let address = PortAddress(rawValue: string) else { throw .invalidAddress(string) }
        self = address
    }

    init(unchecked rawValue: String) {
        self.rawValue = rawValue
        isInProcess = rawValue.hasPrefix("inproc://")
    }

    public var description: String { rawValue }

    public static func == (lhs: PortAddress, rhs: PortAddress) -> Bool { lhs.rawValue == rhs.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
}
