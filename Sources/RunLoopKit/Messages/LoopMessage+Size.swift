import RunLoopWire

extension LoopMessage {
    /// Throws `PortError.messageTooLarge` for a data component over the wire format's
    /// limit per frame (`WireLimits.default.maxFrameBytes`, 64 MiB), which every receiving
    /// port refuses: in-process its decoder drops the message; over ipc and tcp libzmq
    /// (`ZMQ_MAXMSGSIZE`) closes the connection before the message is read, so nothing
    /// would tell the sender. Checked before every send and reply. (Ports and the reply
    /// port are addresses, which `PortAddress` already bounds.)
    @inline(__always)
    func checkSize() throws(PortError) {
        let limit = WireLimits.default.maxFrameBytes
        for case .data(let bytes) in components where bytes.count > limit {
            throw .messageTooLarge(size: bytes.count, limit: limit)
        }
    }
}
