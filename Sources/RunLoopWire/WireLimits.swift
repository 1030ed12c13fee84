/// The bounds a receiver puts on wire messages, so that a peer cannot make it allocate
/// without limit. A message beyond them is rejected whole.
package struct WireLimits: Sendable, Equatable {
    /// The most components in one message. The format allows up to 65535.
    package var maxComponents: Int
    /// The most bytes in any one frame: the message frame, or a component in a frame of its own.
    package var maxFrameBytes: Int
    /// The most bytes (UTF-8) in a reply or port address.
    package var maxAddressBytes: Int

    package init(maxComponents: Int = 1024, maxFrameBytes: Int = 64 << 20, maxAddressBytes: Int = 1024) {
        self.maxComponents = maxComponents
        self.maxFrameBytes = maxFrameBytes
        self.maxAddressBytes = maxAddressBytes
    }

    /// 1024 components, 64 MiB frames, 1024-byte addresses.
    package static let `default` = WireLimits()
}
