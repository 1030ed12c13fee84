import RunLoopWire
import Glibc

/// The last reply address a port validated, and the `RemotePort` made of it.
///
/// A requester sends every request with the same reply address (its thread's reply
/// port), so the receiving port compares the frame with the bytes it validated last
/// (`memcmp`) instead of checking and decoding them into a new `String` each time.
/// Owned by one port and used on its loop's thread only.
struct ReplyAddressCache {
    private var bytes: [UInt8] = []
    private var port: RemotePort?

    /// The port at the address in `frame`, or nil if it is not a valid address of at most
    /// `maxBytes` bytes (see `WireCodec.validatedAddress`).
    mutating func port(at frame: UnsafeRawBufferPointer, maxBytes: Int) -> RemotePort? {
        if let port, frame.count == bytes.count, frame.count <= maxBytes,
           bytes.withUnsafeBytes({ memcmp($0.baseAddress!, frame.baseAddress!, frame.count) == 0 }) {
            return port
        }
        guard let address = WireCodec.validatedAddress(frame, maxBytes: maxBytes) else { return nil }
        let port = RemotePort(PortAddress(unchecked: address))
        bytes = [UInt8](frame)
        self.port = port
        return port
    }
}
