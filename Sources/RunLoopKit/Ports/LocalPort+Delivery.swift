import RunLoopCore
import RunLoopWire

/// Receiving: the port as a port-based input source of its owner's run loop.
extension LocalPort: PortSourceDriver {
    /// `ZMQ_EVENTS` says a message can be received now.
    package func hasPendingMessage() -> Bool {
        guard let socket, let events = try? socket.events else { return false }
        return events.contains(.pollIn)
    }

    /// Receives one message without blocking, decodes it where libzmq put it and delivers
    /// it. A malformed message is dropped with a logged reason and counted; never a crash.
    /// `.empty` means drained: libzmq's non-blocking receive processed the socket's
    /// mailbox before finding nothing (see `ZMQSocket.receive(dontWait:maxFrames:_:)`).
    package func handleOneMessage() -> PortDelivery {
        guard let socket else { return .empty }
        let frames: UnsafeBufferPointer<UnsafeRawBufferPointer>
        do {
            guard let received = try socket.receiveInPlace(dontWait: true) else { return .empty }
            frames = received
        } catch {
            drop(.receiveFailed, "\(error)")
            return .dropped
        }
        let envelope: PortEnvelope
        do {
            defer { socket.releaseReceived() } // before the handler, which may receive again (a nested run)
            envelope = try decodeIncoming(frames)
        } catch {
            drop(PortEnvelope.dropReason(rejecting: error), "\(error)")
            return .dropped
        }
        deliver(envelope)
        return .delivered
    }

    /// The message in the frames a ROUTER socket received: the sender's routing id first,
    /// kept as a request's return path, then the wire message's own frames.
    private func decodeIncoming(_ frames: UnsafeBufferPointer<UnsafeRawBufferPointer>) throws(WireFormatError) -> PortEnvelope {
        guard let (routingID, hasDelimiter, body) = ReturnPath.split(frames) else { throw .noFrames }
        return try PortEnvelope.decode(frames: body, limits: .default, replyAddresses: &replyAddresses,
                                       route: (routingID, hasDelimiter))
    }

    package func detachedFromLoop() {}

    private func deliver(_ envelope: PortEnvelope) {
        statistics.countReceived()
        switch envelope.kind {
        case .message:
            guard handler != nil else { return drop(.noHandler, "no handler for message \(envelope.message.id)") }
            _ = handle(envelope.message)
        case .request:
            guard handler != nil else { return drop(.noHandler, "no handler for request \(envelope.message.id)") }
            guard case .some(let answer) = handle(envelope.message) else { return } // it threw: no reply
            // The reply carries the request's id whatever the handler put in it (wire format).
            var reply = answer ?? LoopMessage(id: envelope.message.id)
            reply.id = envelope.message.id
            sendReply(reply, correlationID: envelope.correlationID, via: envelope.returnPath)
        case .reply:
            // Replies come back on the requester's own connection (`PortConnection`), never to a port.
            drop(.lateReply, "a reply sent to a port, correlation id \(envelope.correlationID)")
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

    /// Sends a reply back over the connection its request came in on, without waiting: a
    /// requester that is gone, or that does not read its replies, costs it its reply, never
    /// the loop its time.
    private func sendReply(_ reply: LoopMessage, correlationID: UInt64, via returnPath: ReturnPath?) {
        guard let socket, let returnPath else { return drop(.replyNotSent, "the port is closed") }
        do { try reply.checkSize() } catch { return drop(.replyNotSent, "\(error)") }
        do {
            guard try socket.send(reply, as: .reply, correlationID: correlationID, dontWait: true, via: returnPath) else {
                return drop(.replyNotSent, "the requester's connection is full: it does not read its replies")
            }
        } catch where error.code == .hostUnreachable {
            drop(.requesterGone, "the requester's connection closed, correlation id \(correlationID)")
        } catch {
            drop(.replyNotSent, "\(error)")
        }
    }
}

/// Dropping a message: counted on the port, on its owner's loop and in metrics, and
/// logged at `.debug` (a peer can send any number of bad messages, so never louder).
extension LocalPort {
    /// Drops a message for `reason`; `detail` is built only if `.debug` is enabled.
    /// Owner thread (where the port's messages are delivered).
    func drop(_ reason: MessageDropReason, _ detail: @autoclosure () -> String) {
        if reason == .replyNotSent || reason == .requesterGone {
            statistics.countFailedReply()
        } else {
            statistics.countDropped()
        }
        ownerLoop?.countDroppedMessage(reason)
        RunLoopKitLog.port.debug("message dropped", metadata: [
            "port": "\(self)", "reason": "\(reason)", "detail": "\(detail())",
        ])
    }
}
