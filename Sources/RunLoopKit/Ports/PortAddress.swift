/// Where a port receives: a ZeroMQ endpoint (`inproc://`, `ipc://` or `tcp://`).
///
/// Port components of messages travel as these addresses; whoever receives one can send there.
public struct PortAddress: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    /// Accepts a valid endpoint only; nil otherwise.
    public init?(rawValue: String) {
        guard WireCodec.isValidAddress(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    /// Validates an endpoint string, throwing `PortError.invalidAddress`.
    public init(validating string: String) throws(PortError) {
        guard let address = PortAddress(rawValue: string) else { throw .invalidAddress(string) }
        self = address
    }

    init(unchecked rawValue: String) { self.rawValue = rawValue }

    public var description: String { rawValue }

    var isInProcess: Bool { rawValue.hasPrefix("inproc://") }
}
