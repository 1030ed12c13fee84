/// Receiving: the port as a port-based input source of its owner's run loop.
extension LocalPort: PortSourceDriver {
    /// `ZMQ_EVENTS` says a message can be received now.
    func hasPendingMessage() -> Bool {
        guard let socket, let events = try? socket.events else { return false }
        return events.contains(.pollIn)
    }

    /// Receives one message without blocking, decodes it and delivers it. A malformed
    /// message is dropped with a logged reason and counted; never a crash.
    func handleOneMessage() -> Bool {
        guard let socket else { return false }
        let frames: [[UInt8]]
        do {
            guard let received = try socket.receive(dontWait: true) else { return false }
            frames = received
        } catch {
            drop(reason: "\(error)")
            return false
        }
        let wire: WireMessage
        do {
            wire = try WireCodec.decode(frames)
        } catch {
            drop(reason: "\(error)")
            return false
        }
        deliver(wire)
        return true
    }

    func detachedFromLoop() {}

    private func deliver(_ wire: WireMessage) {
        let message = LoopMessage(wire: wire)
        statistics.countReceived()
        switch wire.kind {
        case .message:
            guard let handler else { return drop(reason: "no handler for message \(message.id)") }
            _ = handler(message)
        case .request:
            guard let handler else { return drop(reason: "no handler for request \(message.id)") }
            // The reply carries the request's id whatever the handler put in it (wire format).
            var reply = handler(message) ?? LoopMessage(id: message.id)
            reply.id = message.id
            sendReply(reply, to: message.replyPort, correlationID: wire.correlationID)
        case .reply:
            if let replyHandler {
                replyHandler(wire.correlationID, message)
            } else if let handler {
                _ = handler(message)
            }
        }
    }

    /// How long a handler's reply may wait for the requester to take it.
    static let replySendTimeout = Duration.seconds(1)

    private func sendReply(_ reply: LoopMessage, to replyPort: RemotePort?, correlationID: UInt64) {
        guard let replyPort else {
            statistics.countFailedReply()
            LocalPort.logger.warning("reply dropped: the request had no reply port", metadata: ["port": "\(self)"])
            return
        }
        let frames = WireCodec.encode(reply.wire(kind: .reply, correlationID: correlationID))
        do {
            try ThreadPortState.current.send(frames, to: replyPort.address, before: .after(LocalPort.replySendTimeout))
        } catch {
            statistics.countFailedReply()
            LocalPort.logger.warning("reply not sent", metadata: ["port": "\(self)", "error": "\(error)"])
        }
    }

    private func drop(reason: String) {
        statistics.countDropped()
        LocalPort.logger.warning("message dropped", metadata: ["port": "\(self)", "reason": "\(reason)"])
    }
}
