import RunLoopWire

extension LocalPort {
    /// What one peer of a port's ipc and tcp endpoints may make it hold, and for how long a
    /// connection may stay unauthenticated (`docs/security.md`, "Bounded peers"). Senders in
    /// this process (inproc) are not peers: these do not apply to them.
    public struct PeerLimits: Sendable, Equatable {
        /// The largest frame a peer may send, in bytes (`ZMQ_MAXMSGSIZE`): a peer that
        /// announces a longer one is disconnected before its bytes are read, and loses what it
        /// sent on that connection after it. Between 1 and the wire format's frame limit
        /// (`wireFrameLimit`, 64 MiB), to which a larger value is lowered.
        /// A port's RunLoopKit senders send frames of up to 64 MiB: a lower limit is for
        /// ports whose peers send less (`docs/wire-format.md`, "Limits").
        public var maxFrameBytes: Int
        /// How long a connection may take to complete its handshake (`ZMQ_HANDSHAKE_IVL`: the
        /// ZMTP greeting, then CURVE and the allow-list check): one that has not by then is
        /// closed, so a peer that connects and says nothing holds a descriptor that long at
        /// most. At least 1 ms.
        public var handshakeTimeout: Duration

        /// The wire format's frame limit, 64 MiB: the most `maxFrameBytes` may be.
        public static let wireFrameLimit = WireLimits.default.maxFrameBytes

        /// Limits with these values, each brought within its bounds (above).
        public init(maxFrameBytes: Int = PeerLimits.wireFrameLimit, handshakeTimeout: Duration = .seconds(10)) {
            self.maxFrameBytes = min(max(maxFrameBytes, 1), PeerLimits.wireFrameLimit)
            self.handshakeTimeout = max(handshakeTimeout, .milliseconds(1))
        }

        /// Frames up to the wire format's 64 MiB; 10 s for a handshake.
        public static let `default` = PeerLimits()

        /// `handshakeTimeout` in whole milliseconds, for `ZMQ_HANDSHAKE_IVL`.
        var handshakeMilliseconds: Int32 {
            let (seconds, attoseconds) = handshakeTimeout.components
            guard seconds < Int64(Int32.max / 1000) else { return .max } // about 24 days
            let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
            return Int32(clamping: max(milliseconds, 1))
        }
    }
}
