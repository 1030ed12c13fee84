/// The bounds a receiver puts on wire messages, so that a peer cannot make it allocate
/// without limit. A message beyond them is rejected whole.
@usableFromInline package struct WireLimits: Sendable, Equatable {
    /// The most components in one message. The format allows up to 65535.
    @usableFromInline package var maxComponents: Int
    /// The most bytes in any one frame: the message frame, or a component in a frame of its own.
    @usableFromInline package var maxFrameBytes: Int
    /// The most bytes (UTF-8) in a reply or port address.
    @usableFromInline package var maxAddressBytes: Int

    @inlinable
    package init(maxComponents: Int = 1024, maxFrameBytes: Int = 64 << 20, maxAddressBytes: Int = 1024) {
        self.maxComponents = maxComponents
        self.maxFrameBytes = maxFrameBytes
        self.maxAddressBytes = maxAddressBytes
    }

    /// 1024 components, 64 MiB frames, 1024-byte addresses. Made where it is read (a
    /// constant the optimizer folds), not a global behind a once-only initializer.
    @inlinable
    package static var `default`: WireLimits { WireLimits() }
}
