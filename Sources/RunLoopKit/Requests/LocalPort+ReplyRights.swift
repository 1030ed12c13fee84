import RunLoopCore
import RunLoopWire
import RunLoopZMQ

/// A port's requests delivered with their reply rights (`PortHandler.deferring`): kept by
/// connection until answered, cancelled by their requester or by its connection's end,
/// answered on the owner thread whatever thread holds the right. Owner thread, except
/// `carryOut`.
extension LocalPort {
    /// Delivers a request with its reply right to a deferring handler; what the right's
    /// holder does with it answers the request (see `ReplyRightState`).
    func deliverWithRight(_ message: LoopMessage, correlationID: UInt64, returnPath: ReturnPath?,
                          to handler: DeferringHandler) {
        guard let returnPath else { return } // a port's requests always come with their route
        statistics.countReceived()
        let request = OutstandingRequest(port: self, requestID: message.id, correlationID: correlationID,
                                         returnPath: returnPath)
        if let descriptor = lastSourceDescriptor {
            watchClients()
            // A descriptor kept for another connection: that one went, and its end is on
            // the monitor already (reported before its descriptor could be reused).
            if outstandingRequests.connection(onDescriptor: descriptor).map({ $0 != returnPath.routingID }) ?? false {
                cancelRequestsOfGoneClients()
            }
            request.sourceDescriptor = descriptor
        }
        outstandingRequests.insert(request)
        statistics.rightGiven()
        // From an in-process requester gone since it sent it: its right is born cancelled.
        if !goneInProcessRequesters.isEmpty, goneInProcessRequesters.contains(returnPath.routingID) {
            cancel(outstandingRequests.take(correlationID, from: returnPath.routingID).map { [$0] } ?? [])
        }
        do {
            try handler(message, ReplyRight(request))
            request.handlerEnded(throwing: nil)
        } catch {
            report(error, handling: message)
            request.handlerEnded(throwing: error)
        }
    }

    /// A request for a port without a handler that takes requests: answered with a no
    /// reply at once (nobody holds its right), counted as `noHandler`.
    func refuse(requestID: Int32, correlationID: UInt64, via returnPath: ReturnPath?) {
        drop(.noHandler, "no handler for request \(requestID)")
        sendReply(LoopMessage(id: requestID), as: .noReply, correlationID: correlationID, via: returnPath)
    }

    /// A cancel from the connection `routingID`: the request it names, if that connection
    /// sent it and it is still outstanding, is cancelled (its right reports it, its
    /// cancellation handlers run now); else the cancel is dropped as `lateCancel`.
    func cancelRequest(_ correlationID: UInt64, from routingID: RoutingID) {
        guard let request = outstandingRequests.take(correlationID, from: routingID) else {
            return drop(.lateCancel, "a cancel for no request outstanding on its connection, correlation id \(correlationID)")
        }
        request.cancel()
        statistics.countCancelledRequest() // after: a reader that sees the count sees the right cancelled
    }

    /// Starts the monitor of the port's connections, if it is not running: a request kept
    /// with its right came in over ipc or tcp, and its requester may go.
    func watchClients() {
        guard clientWatch == nil else { return }
        do {
            clientWatch = try ZMQDisconnectMonitor(watching: socket)
        } catch {
            RunLoopKitLog.port.warning("cannot watch a port's connections: a requester that goes is learnt at its reply",
                                       metadata: ["port": "\(self)", "error": "\(error)"])
        }
    }

    /// Cancels the outstanding requests of every connection reported gone since last asked.
    func cancelRequestsOfGoneClients() {
        guard let clientWatch else { return }
        while let descriptor = try? clientWatch.nextDisconnected() {
            cancel(outstandingRequests.takeAll(onDescriptor: descriptor))
        }
    }

    /// An in-process requester's connection (`routingID`) closed: its thread exited, or
    /// closed it. Its requests outstanding are cancelled, and those still queued are
    /// delivered cancelled, as over ipc and tcp the connection's end cancels them
    /// (`watchClients`), which libzmq does not report for inproc. Handed to the owner loop
    /// (in its next pass, whatever its mode); neither side waits. Any thread.
    func inProcessRequesterGone(_ routingID: RoutingID) {
        if isOwnerThread { return requesterGone(routingID) }
        _ = ownerLoop?.runOnOwnerThread { [self] _ in requesterGone(routingID) }
        // Not queued: the owner thread is gone, and the port closed with it.
    }

    /// `inProcessRequesterGone` on the owner thread.
    private func requesterGone(_ routingID: RoutingID) {
        guard socket.isOpen else { return }
        if outstandingRequests.count > 0 { cancel(outstandingRequests.takeAll(from: routingID)) }
        // Its requests not read yet: everything it sent was queued before it closed, so
        // once the socket has nothing queued, none is left. Asking runs the socket's
        // commands, which may take its descriptor's signal: the loop asks again.
        guard let events = try? socket.events, events.contains(.pollIn) else { return }
        goneInProcessRequesters.insert(routingID)
        if let loop = ownerLoop, !loop.isTornDown, loop.isOwnerThread { loop.sentOnPortSource(self) }
    }

    /// Cancels requests whose requester is gone (or gave them up).
    func cancel(_ requests: [OutstandingRequest]) {
        for request in requests {
            request.cancel()
            statistics.countCancelledRequest() // after: a reader that sees the count sees the right cancelled
        }
    }

    /// The port closes: each request whose right is still held is answered with a no reply
    /// now, while the socket is open (as a dead Mach receive right's send-once rights notify
    /// their requesters), and cancelled, so that what its right's holder sends later is
    /// dropped and counted. Owner thread.
    func answerOutstandingRequestsAtClose() {
        guard outstandingRequests.count > 0 else { return }
        for request in outstandingRequests.takeEveryRequest() {
            sendReply(LoopMessage(id: request.requestID), as: .noReply, correlationID: request.correlationID,
                      via: request.returnPath)
            request.cancel()
        }
    }

    /// The port closes: each request still queued in its socket, never read, is answered
    /// with a no reply now, so that its requester fails at once (`PortError.noReply`)
    /// rather than at its receive timeout, as a destroyed Mach port's queued messages send
    /// their send-once notifications. Other messages queued are discarded with the port.
    /// Never waits: reads what is queued, at most `maxReadAtClose` messages (senders may go
    /// on sending meanwhile), and a no reply the requester's connection does not take at
    /// once is dropped and counted (`replyNotSent`). The port is already closing in the
    /// directory, so no new in-process connection comes. Returns how many were answered.
    @discardableResult
    func answerQueuedRequestsAtClose() -> Int {
        guard socket.isOpen else { return 0 }
        var answered = 0
        var read = 0
        while read < LocalPort.maxReadAtClose {
            let request: (returnPath: ReturnPath, requestID: Int32, correlationID: UInt64)??
            do {
                request = try socket.receive(dontWait: true) { frames in
                    guard let (routingID, hasDelimiter, body) = ReturnPath.split(frames),
                          let header = try? WireCodec.checkedHeader(body, limits: .default),
                          header.kind == .request else { return nil }
                    return (ReturnPath(routingID: RoutingID(routingID), hasDelimiter: hasDelimiter),
                            header.messageID, header.correlationID)
                }
            } catch where error.code == .tooManyFrames {
                read += 1 // received to its end and discarded
                continue
            } catch {
                break
            }
            guard let message = request else { break } // nothing more queued
            read += 1
            guard let (returnPath, requestID, correlationID) = message else { continue }
            sendReply(LoopMessage(id: requestID), as: .noReply, correlationID: correlationID, via: returnPath)
            answered += 1
        }
        if read > 0 {
            RunLoopKitLog.port.debug("messages queued at the port's close", metadata: [
                "port": "\(self)", "read": "\(read)", "requestsAnswered": "\(answered)",
            ])
        }
        return answered
    }

    /// The most queued messages a closing port reads to answer their requests.
    static let maxReadAtClose = 100_000

    /// Does what a reply right's holder made of it (`ReplyRightState.Action`), on the
    /// owner thread: now if called there, else handed to the owner's loop, which does it in
    /// its next pass whatever its mode; neither side waits. `ending`: the right is settled
    /// now, so it leaves the table and the count. Any thread.
    func carryOut(_ action: ReplyRightState.Action, ending: Bool, for request: OutstandingRequest) {
        if case .none = action, !ending { return }
        if isOwnerThread { return answer(request, with: action, ending: ending) }
        let queued = ownerLoop?.runOnOwnerThread { [self] _ in answer(request, with: action, ending: ending) } ?? false
        guard !queued else { return }
        // The owner thread is gone, and the port with it: nothing can be sent.
        if ending { statistics.rightSettled() }
        let reason: MessageDropReason
        switch action {
        case .none: return
        case .dropCancelled:
            reason = .replyCancelled // the port's close cancelled it
            statistics.countDropped()
        case .send, .sendNoReply, .dropAnswered:
            reason = .replyNotSent
            statistics.countFailedReply()
        }
        RunLoopKitLog.port.debug("message dropped", metadata: [
            "port": "\(self)", "reason": "\(reason)",
            "detail": "the port's owner thread has exited, correlation id \(request.correlationID)",
        ])
    }

    /// `carryOut` on the owner thread.
    func answer(_ request: OutstandingRequest, with action: ReplyRightState.Action, ending: Bool) {
        if ending {
            outstandingRequests.remove(request)
            statistics.rightSettled()
        }
        let correlationID = request.correlationID
        switch action {
        case .none:
            break
        case .send(.reply(let reply)):
            sendAnswer(reply, to: request.requestID, correlationID: correlationID, via: request.returnPath)
        case .send(.failure(let reason)):
            sendReply(LoopMessage(id: request.requestID, text: reason), as: .failure, correlationID: correlationID,
                      via: request.returnPath)
        case .sendNoReply:
            sendReply(LoopMessage(id: request.requestID), as: .noReply, correlationID: correlationID,
                      via: request.returnPath)
        case .dropCancelled:
            drop(.replyCancelled, "a reply to a request its requester gave up, correlation id \(correlationID)")
        case .dropAnswered:
            drop(.replyNotSent, "a second answer to a request its handler's failure answered, correlation id \(correlationID)")
        }
        // A send outside the port's delivery (a control action) may have run the socket's
        // commands, a request's arrival among them, and taken its descriptor's signal:
        // the loop asks `ZMQ_EVENTS` and drains the port if a message waits.
        // (Not while the loop is torn down at its thread's exit, which runs the last control
        // actions: its ports are gone from it by then.)
        switch action {
        case .send, .sendNoReply:
            if let loop = ownerLoop, !loop.isTornDown, loop.isOwnerThread { loop.sentOnPortSource(self) }
        case .none, .dropCancelled, .dropAnswered:
            break
        }
    }
}
