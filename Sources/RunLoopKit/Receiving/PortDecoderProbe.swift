import RunLoopWire

/// A port's receive path on frames given as arrays, for the wire decoder's fuzzer
/// (`Fuzz/wire-decoder`) and tests: what a port's ROUTER socket makes of a message whose
/// first frame is the sender's routing id — the wire message it would deliver, or the
/// error it would drop the message for. The same code as a port's (`ReturnPath.split`,
/// `PortEnvelope.decode` through `PortEnvelope.check`, with a reply-address cache kept from
/// one message to the next), over frames laid out in one buffer as a socket lends them.
package struct PortDecoderProbe {
    private var replyAddresses = ReplyAddressCache()
    /// As a port keeps it: each decoded message's buffers go back for the next.
    private var storage = ReceivedMessageStorage()

    package init() {}

    package mutating func decode(_ frames: [[UInt8]], limits: WireLimits) throws(WireFormatError) -> WireMessage {
        try WireCodec.withFramesLent(frames) { (frames) throws(WireFormatError) in
            guard let (routingID, hasDelimiter, body) = ReturnPath.split(frames) else { throw .noFrames }
            var envelope = try PortEnvelope.decode(frames: body, limits: limits, replyAddresses: &replyAddresses,
                                                   route: (routingID, hasDelimiter), storage: &storage)
            let message = envelope.wireMessage
            storage.recycle(&envelope.message.components)
            return message
        }
    }
}
