import RunLoopWire

extension LoopMessage {
    /// Throws `PortError.messageTooLarge` for a data component over the wire format's
    /// limit per frame (`WireLimits.default.maxFrameBytes`, 64 MiB), which every receiving
    /// port refuses: in-process its decoder drops the message; over ipc and tcp libzmq
    /// (`ZMQ_MAXMSGSIZE`) closes the connection before the message is read, so nothing
    /// would tell the sender. Checked before every send and reply. (Ports and the reply
    /// port are addresses, which `PortAddress` already bounds.)
    ///
    /// - Returns: whether the message carries descriptors (sent beside it, on the
    ///   destination's side channel).
    @inline(__always) @discardableResult
    func checkSize() throws(PortError) -> Bool {
        let limit = WireLimits.default.maxFrameBytes
        var carriesDescriptors = false
        for component in components {
            switch component {
            case .data(let bytes): if bytes.count > limit { throw .messageTooLarge(size: bytes.count, limit: limit) }
            case .port: break
            case .descriptor: carriesDescriptors = true
            }
        }
        return carriesDescriptors
    }
}
