import RunLoopCore
import RunLoopWire
import RunLoopZMQ

/// Receiving: the port as a port-based input source of its owner's run loop.
extension LocalPort: PortBasedSource, WireReceiver {
    /// `ZMQ_EVENTS` says a message can be received now.
    package func hasPendingMessage() -> Bool {
        guard socket.isOpen, let events = try? socket.events else { return false }
        // Asking for the events ran the socket's commands, a requester's connection's end
        // among them: its monitor has the news by then (`ZMQDisconnectMonitor`).
        if outstandingRequests.count > 0, clientWatch != nil { cancelRequestsOfGoneClients() }
        guard events.contains(.pollIn) else {
            // Everything queued was read: no request of a gone in-process requester is left.
            if !goneInProcessRequesters.isEmpty { goneInProcessRequesters.removeAll() }
            // Drained, as far as ZeroMQ goes: the senders ring their doorbells for their next queued notes.
            return descriptorSlot.queuesOpen && armQueues()
        }
        return true
    }

    /// Whether the port's ROUTER still keeps a pipe to a peer (a connection, or what is
    /// left of one), with room for a reply: `ZMQ_EVENTS`' `POLLOUT`, which a ROUTER with
    /// `ZMQ_ROUTER_MANDATORY` sets while any peer's pipe can take a message. A departed
    /// requester's pipe is dropped only by the last command of its end (libzmq's
    /// `pipe_term_ack`, which its I/O thread sends once the socket answered its
    /// `pipe_term`), so false proves every end processed: the loop has nothing left to do
    /// for them. Asking runs the socket's pending commands. Owner thread only; for tests.
    var keepsAnyPeer: Bool {
        guard socket.isOpen, let events = try? socket.events else { return false }
        return events.contains(.pollOut)
    }

    /// A ROUTER that binds: what a peer sent before hanging up stays until it is read.
    package var canAskInsteadOfDraining: Bool { true }

    /// Receives one message without blocking, decodes it where libzmq put it and delivers
    /// it. A malformed message is dropped with a logged reason and counted; never a crash.
    /// `.empty` means drained: libzmq's non-blocking receive processed the socket's
    /// mailbox before finding nothing (see `ZMQSocket.receive(dontWait:maxFrames:_:)`).
    package func handleOneMessage() -> PortDelivery {
        guard socket.isOpen else { return .empty }
        // Queued notes first: each comes before whatever its sender sent over ZeroMQ next (a fence).
        if descriptorSlot.queuedNotesMayWait, let delivery = deliverQueuedNote() { return delivery }
        let delivery: PortDelivery
        if let borrowingHandler {
            delivery = deliverInPlace(from: socket, to: borrowingHandler)
        } else {
            // The frames are given back before the handler runs: it may receive again (a nested run).
            delivery = receiveOne(from: socket, decode: { (frames) throws(WireFormatError) in
                try decodeIncoming(frames, from: socket)
            }, deliver: { envelope in
                deliver(envelope)
                return .delivered
            })
        }
        // Drained: the receive ran the socket's commands, a requester's connection's end
        // among them, whose monitor event came first (`ZMQDisconnectMonitor`).
        if case .empty = delivery {
            if outstandingRequests.count > 0 { cancelRequestsOfGoneClients() }
            // Everything queued was read: no request of a gone in-process requester is left.
            if !goneInProcessRequesters.isEmpty { goneInProcessRequesters.removeAll() }
            // Drained: the senders ring their doorbells for their next queued notes.
            if descriptorSlot.queuesOpen, armQueues(), let queued = deliverQueuedNote() { return queued }
        }
        return delivery
    }

    /// The message in the frames `socket`, a ROUTER socket, received: the sender's routing
    /// id first, kept as a request's return path, then the wire message's own frames. Who
    /// sent it (docs/security.md) is read from the frames' metadata while they are held.
    private func decodeIncoming(_ frames: UnsafeBufferPointer<UnsafeRawBufferPointer>,
                                from socket: ZMQSocket) throws(WireFormatError) -> PortEnvelope {
        guard let (routingID, hasDelimiter, body) = ReturnPath.split(frames) else { throw .noFrames }
        if readsSourceDescriptor { lastSourceDescriptor = socket.receivedSourceDescriptor(ofFrame: 0) }
        return try PortEnvelope.decode(frames: body, limits: .default, replyAddresses: &replyAddresses,
                                       route: (routingID, hasDelimiter),
                                       sender: senderReader.sender(ofReceived: socket, frame: frames.count - 1), storage: &storage,
                                       descriptors: descriptorSlot)
    }

    package func detachedFromLoop() {}

    func deliver(_ envelope: consuming PortEnvelope) {
        switch envelope.kind {
        case .message:
            if let handler = returningHandler {
                statistics.countReceived()
                do {
                    if let answer = try handler(envelope.message) { LocalPort.ignore(answer) }
                } catch {
                    report(error, handling: envelope.message)
                }
            } else if let handler = deferringHandler {
                statistics.countReceived()
                do { try handler(envelope.message, nil) } catch { report(error, handling: envelope.message) }
            } else {
                drop(.noHandler, "no handler for message \(envelope.message.id)")
            }
        case .request:
            if let handler = returningHandler {
                statistics.countReceived()
                // No `Result` in between: on the request path its generic copies cost more than the rest.
                let requestID = envelope.message.id
                do {
                    sendAnswer(try handler(envelope.message), to: requestID, correlationID: envelope.correlationID,
                               via: envelope.returnPath)
                } catch {
                    report(error, handling: envelope.message)
                    sendFailure(error, to: requestID, correlationID: envelope.correlationID, via: envelope.returnPath)
                }
            } else if let handler = deferringHandler {
                deliverWithRight(envelope.message, correlationID: envelope.correlationID,
                                 returnPath: envelope.returnPath, to: handler)
            } else {
                refuse(requestID: envelope.message.id, correlationID: envelope.correlationID, via: envelope.returnPath)
            }
        case .reply, .failure, .noReply:
            dropReply(envelope.kind, correlationID: envelope.correlationID)
        case .cancel:
            if let returnPath = envelope.returnPath {
                cancelRequest(envelope.correlationID, from: returnPath.routingID)
            }
        }
        // The handler is done with the message (and a request's answer, which may be the
        // request itself, is sent): its buffers serve the next one.
        storage.recycle(&envelope.message.components)
    }

    /// Lets go of what a handler returned for a one-way message: nobody waits for it. Its
    /// callers unwrap the answer first, so that a nil one (the usual) costs a test: `_ =`
    /// of a `LoopMessage?` destroys it through its value witness, about 60 instructions.
    @inline(never)
    private static func ignore(_ answer: consuming LoopMessage) {}

    /// Drops a reply or failure sent to a port: replies come back on the requester's own
    /// connection (`PortConnection`), never to a port.
    private func dropReply(_ kind: WireKind, correlationID: UInt64) {
        drop(.lateReply, "a \(kind) sent to a port, correlation id \(correlationID)")
    }

    /// Reports a handler's error: to `onHandlerError`, else as a warning; counted.
    func report(_ error: any Error, handling message: @autoclosure () -> LoopMessage) {
        statistics.countHandlerError()
        if let onHandlerError {
            onHandlerError(error, message())
        } else {
            RunLoopKitLog.port.warning("a port handler threw", metadata: [
                "port": "\(self)", "message": "\(message().id)", "error": "\(error)",
            ])
        }
    }

    /// Answers a request with what its handler made of it: the reply, carrying the
    /// request's id whatever the handler put in it (wire format), or the handler's failure.
    private func answer(_ requestID: Int32, correlationID: UInt64, via returnPath: ReturnPath?,
                        with outcome: Result<LoopMessage?, any Error>) {
        switch outcome {
        case .success(let answer): sendAnswer(answer, to: requestID, correlationID: correlationID, via: returnPath)
        case .failure(let error): sendFailure(error, to: requestID, correlationID: correlationID, via: returnPath)
        }
    }

    /// Sends a handler's answer as the reply to request `requestID`, with the request's id
    /// whatever the handler put in it (wire format); an empty reply for nil.
    /// (Unwrapped, not `??`: a nil answer then costs neither a copy nor a destroy of the
    /// optional through its value witnesses.)
    func sendAnswer(_ answer: consuming LoopMessage?, to requestID: Int32, correlationID: UInt64,
                            via returnPath: ReturnPath?) {
        switch consume answer {
        case .none:
            sendReply(LoopMessage(id: requestID), as: .reply, correlationID: correlationID, via: returnPath)
        case .some(var reply):
            reply.id = requestID
            sendReply(reply, as: .reply, correlationID: correlationID, via: returnPath)
        }
    }

    /// Sends a handler's failure in place of the reply to request `requestID`.
    private func sendFailure(_ error: any Error, to requestID: Int32, correlationID: UInt64, via returnPath: ReturnPath?) {
        let failure = LoopMessage(id: requestID, text: LocalPort.failureReason(error))
        sendReply(failure, as: .failure, correlationID: correlationID, via: returnPath)
    }

    /// What one borrowed delivery came to, as its receive returns it: a trivial enum, so
    /// that nothing of it is copied or destroyed through value witnesses per message (a
    /// request's answer waits in `borrowedAnswer` instead).
    enum BorrowedOutcome {
        case handled
        /// A request was handled; its answer is in `borrowedAnswer`.
        case answered
        /// A reply or failure sent to a port (dropped and counted).
        case dropped
    }

    /// Receives one message and delivers it to a borrowing handler while its frames are
    /// still lent (checked as every message is: `PortEnvelope.check`); a request is answered
    /// once they are given back.
    private func deliverInPlace(from socket: ZMQSocket, to handler: BorrowingHandler) -> PortDelivery {
        receiveOne(from: socket, decode: { (frames) throws(WireFormatError) -> BorrowedOutcome in
            guard let (routingID, hasDelimiter, body) = ReturnPath.split(frames) else { throw .noFrames }
            let checked = try PortEnvelope.check(body, limits: .default, replyAddresses: &replyAddresses)
            let header = checked.header
            switch header.kind {
            case .message, .request: break
            case .reply, .failure, .noReply:
                dropReply(header.kind, correlationID: header.correlationID)
                return .dropped
            case .cancel:
                cancelRequest(header.correlationID, from: RoutingID(routingID))
                return .dropped
            }
            if header.claimCount > 0 { // descriptors or shared data; the common message has neither
                return try deliverClaiming(checked, routingID: routingID, hasDelimiter: hasDelimiter,
                                           sender: senderReader.sender(ofReceived: socket, frame: frames.count - 1)?.sender,
                                           to: handler)
            }
            statistics.countReceived()
            let view = LoopMessageView(checked, sender: senderReader.sender(ofReceived: socket, frame: frames.count - 1)?.sender)
            return handle(view, correlationID: header.correlationID, routingID: routingID, hasDelimiter: hasDelimiter, by: handler)
        }, deliver: { outcome in
            switch outcome {
            case .dropped: return .dropped
            case .handled: return .delivered
            case .answered:
                if let answer = borrowedAnswer.take() {
                    self.answer(answer.id, correlationID: answer.correlationID, via: answer.returnPath, with: answer.outcome)
                }
                return .delivered
            }
        })
    }

    /// Lends `view` to `handler`; a request's outcome is kept for its answer, sent once the
    /// frames were given back (`borrowedAnswer`).
    @inline(__always)
    func handle(_ view: borrowing LoopMessageView, correlationID: UInt64, routingID: UnsafeRawBufferPointer,
                        hasDelimiter: Bool, by handler: BorrowingHandler) -> BorrowedOutcome {
        guard view.isRequest else {
            do {
                if let answer = try handler(view) { LocalPort.ignore(answer) }
            } catch {
                report(error, handling: view.owned)
            }
            return .handled
        }
        let outcome: Result<LoopMessage?, any Error>
        do {
            outcome = .success(try handler(view))
        } catch {
            report(error, handling: view.owned)
            outcome = .failure(error)
        }
        // Set after the handler: a nested run inside it has answered its own by now.
        borrowedAnswer = BorrowedAnswer(id: view.id, correlationID: correlationID,
                                        returnPath: ReturnPath(routingID: RoutingID(routingID), hasDelimiter: hasDelimiter),
                                        outcome: outcome)
        return .answered
    }

    /// A borrowed message with descriptor or shared data components. Descriptors: claimed,
    /// closed and the message dropped (a borrowed message owns nothing). Shared data: read
    /// where it lies, in its sender's ring (the view is of the message as if each shared
    /// component had travelled in a frame of its own, that frame its bytes in the ring,
    /// `WireCodec.withSharedDataResolved`), and given back once the handler returned.
    /// Throws `descriptorsNotFound` (the message is dropped, counted `unknownDescriptors`)
    /// for a note that names no ring its process gave this port, or bytes outside it.
    @inline(never) // off the common message's way
    private func deliverClaiming(_ checked: consuming PortEnvelope.Checked, routingID: UnsafeRawBufferPointer, hasDelimiter: Bool,
                                 sender: MessageSender?, to handler: BorrowingHandler) throws(WireFormatError) -> BorrowedOutcome {
        let header = checked.header
        if header.components.contains(where: \.isDescriptor) {
            _ = try PortEnvelope.claimComponents(header, from: descriptorSlot.receiver, sender: sender)
            throw .descriptorsNotFound(component: 0)
        }
        guard let receiver = descriptorSlot.receiver, let pid = PortEnvelope.process(of: sender) else {
            throw .descriptorsNotFound(component: 0)
        }
        var lent: [(ring: MappedRing, end: UInt64)] = [] // kept until the handler returned, each given back after it
        defer { for (ring, end) in lent { ring.giveBack(endingAt: end) } }
        let outcome = try WireCodec.withSharedDataResolved(header, { component in
            guard let (ring, note, bytes) = PortEnvelope.sharedBytes(of: component, in: receiver, from: pid) else { return nil }
            lent.append((ring, note.start &+ note.length))
            return bytes
        }) { (frames) throws(WireFormatError) -> BorrowedOutcome in
            let resolved = try PortEnvelope.check(frames, limits: .default, replyAddresses: &replyAddresses)
            statistics.countReceived()
            return handle(LoopMessageView(resolved, sender: sender), correlationID: header.correlationID,
                          routingID: routingID, hasDelimiter: hasDelimiter, by: handler)
        }
        guard let outcome else { throw .descriptorsNotFound(component: 0) }
        return outcome
    }

    /// The most bytes of a handler's error description a failure reply carries.
    static let maxFailureReasonBytes = 1024

    /// What a failure reply says of `error`: its description, cut at a character boundary
    /// to at most `maxFailureReasonBytes` of UTF-8.
    static func failureReason(_ error: any Error) -> String {
        String(describing: error).prefix(utf8Bytes: maxFailureReasonBytes)
    }

    /// Sends a reply (or a failure in its place) back over the connection its request came
    /// in on, without waiting: a requester that is gone, or that does not read its replies,
    /// costs it its reply, never the loop its time.
    func sendReply(_ reply: LoopMessage, as kind: WireKind, correlationID: UInt64, via returnPath: ReturnPath?) {
        guard socket.isOpen, let returnPath else { return drop(.replyNotSent, "the port is closed") }
        do {
            // Descriptors go to a named port's side channel; a requester's connection has none.
            if try reply.checkSize() { return drop(.replyNotSent, "a reply cannot carry descriptors") }
        } catch {
            return drop(.replyNotSent, "\(error)")
        }
        do {
            guard try socket.send(reply, as: kind, correlationID: correlationID, dontWait: true, via: returnPath) else {
                return drop(.replyNotSent, "the requester's connection is full: it does not read its replies")
            }
        } catch where error.code == .hostUnreachable {
            drop(.requesterGone, "the requester's connection closed, correlation id \(correlationID)")
            if outstandingRequests.count > 0 { cancel(outstandingRequests.takeAll(from: returnPath.routingID)) }
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

/// A request a borrowing handler answered, waiting for its frames to be given back:
/// where its answer goes and what the handler made of it. (A struct, not a tuple: see
/// `PortEnvelope.Checked`.)
struct BorrowedAnswer {
    let id: Int32
    let correlationID: UInt64
    let returnPath: ReturnPath
    let outcome: Result<LoopMessage?, any Error>
}
