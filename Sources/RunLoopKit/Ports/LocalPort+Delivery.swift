/// Receiving: the port as a port-based input source of its owner's run loop.
extension LocalPort: PortSourceDriver {
    /// `ZMQ_EVENTS` says a message can be received now.
    func hasPendingMessage() -> Bool {
        guard let socket, let events = try? socket.events else { return false }
        return events.contains(.pollIn)
    }

    /// Receives one message without blocking, decodes it where libzmq put it and delivers
    /// it. A malformed message is dropped with a logged reason and counted; never a crash.
    /// `.empty` means drained: libzmq's non-blocking receive processed the socket's
    /// mailbox before finding nothing (see `ZMQSocket.receive(dontWait:maxFrames:_:)`).
    func handleOneMessage() -> PortDelivery {
        guard let socket else { return .empty }
        // The decoding closure works on a local copy of the cache, so that it holds no
        // reference to the port: the loop references ports weakly, and a weakly referenced
        // object's every retain and release takes the runtime's slow path.
        var cache = replyAddresses
        defer { replyAddresses = cache }
        let decoded: Result<PortEnvelope, WireFormatError>
        do {
            guard let received = try socket.receive(dontWait: true, { frames in
                Result { () throws(WireFormatError) in
                    try WireCodec.decode(frames: frames, limits: .default, replyAddresses: &cache)
                }
            }) else { return .empty }
            decoded = received
        } catch {
            drop(.receiveFailed, "\(error)")
            return .dropped
        }
        switch decoded {
        case .success(let envelope):
            deliver(envelope)
            return .delivered
        case .failure(let error):
            drop(MessageDropReason(rejecting: error), "\(error)")
            return .dropped
        }
    }

    func detachedFromLoop() {}

    private func deliver(_ envelope: PortEnvelope) {
        let message = envelope.message
        statistics.countReceived()
        switch envelope.kind {
        case .message:
            guard handler != nil else { return drop(.noHandler, "no handler for message \(message.id)") }
            _ = handle(message)
        case .request:
            guard handler != nil else { return drop(.noHandler, "no handler for request \(message.id)") }
            guard case .some(let answer) = handle(message) else { return } // it threw: no reply
            // The reply carries the request's id whatever the handler put in it (wire format).
            var reply = answer ?? LoopMessage(id: message.id)
            reply.id = message.id
            sendReply(reply, to: message.replyPort, correlationID: envelope.correlationID)
        case .reply:
            if let replyHandler {
                replyHandler(envelope.correlationID, message)
            } else {
                _ = handle(message)
            }
        }
    }

    /// Calls the handler; nil if it threw, after reporting the error.
    private func handle(_ message: LoopMessage) -> LoopMessage?? {
        guard let handler else { return nil }
        do {
            return .some(try handler(message))
        } catch {
            statistics.countHandlerError()
            if let handlerErrorHandler {
                handlerErrorHandler(error, message)
            } else {
                RunLoopKitLog.port.warning("a port handler threw", metadata: [
                    "port": "\(self)", "message": "\(message.id)", "error": "\(error)",
                ])
            }
            return nil
        }
    }

    /// How long a handler's reply may wait for the requester to take it.
    static let replySendTimeout = Duration.seconds(1)

    private func sendReply(_ reply: LoopMessage, to replyPort: RemotePort?, correlationID: UInt64) {
        guard let replyPort else {
            return drop(.replyNotSent, "the request had no reply port")
        }
        do {
            try ThreadPortState.current.send(PortEnvelope(.reply, reply, correlationID: correlationID),
                                             to: replyPort, before: .after(LocalPort.replySendTimeout))
        } catch {
            drop(.replyNotSent, "\(error)")
        }
    }
}
