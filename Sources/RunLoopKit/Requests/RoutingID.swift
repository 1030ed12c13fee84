/// The routing id a port's ROUTER socket gave one requester's connection, kept for the
/// reply. libzmq's own ids are 5 bytes and a peer's chosen one (`ZMQ_ROUTING_ID`) at most
/// 255: up to 16 bytes are kept inline, so that a request's return path allocates nothing.
struct RoutingID: Sendable, Hashable {
    /// How many bytes are kept inline.
    static let inlineCapacity = MemoryLayout<(UInt64, UInt64)>.size

    let count: Int
    private var inline: (UInt64, UInt64) = (0, 0)
    /// The bytes of a longer id.
    private var longer: [UInt8]?

    init(_ bytes: UnsafeRawBufferPointer) {
        count = bytes.count
        if count <= RoutingID.inlineCapacity {
            Swift.withUnsafeMutableBytes(of: &inline) { storage in
                UnsafeMutableRawBufferPointer(rebasing: storage[..<bytes.count]).copyMemory(from: bytes)
            }
        } else {
            longer = [UInt8](bytes)
        }
    }

    /// Lends `body` the id's bytes.
    func withUnsafeBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        if let longer {
            return try longer.withUnsafeBufferPointer { bytes throws(Failure) in try body(UnsafeRawBufferPointer(bytes)) }
        }
        return try Swift.withUnsafeBytes(of: inline) { bytes throws(Failure) in
            try body(UnsafeRawBufferPointer(rebasing: bytes[..<count]))
        }
    }

    /// Compared and hashed by the inline words when the id fits them (bytes past `count`
    /// stay zero), by the bytes only for a longer id: a port's table of outstanding requests
    /// looks one up per deferred request.
    static func == (lhs: RoutingID, rhs: RoutingID) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if let left = lhs.longer, let right = rhs.longer { return left == right }
        return lhs.inline == rhs.inline
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        if let longer {
            longer.withUnsafeBytes { hasher.combine(bytes: $0) }
        } else {
            hasher.combine(inline.0)
            hasher.combine(inline.1)
        }
    }
}
