import Glibc
import RunLoopCore
import RunLoopWire
import RunLoopZMQ

/// Statistics queries (wire kind 6, `docs/wire-format.md`): answered by the library on the
/// port's owner thread, from the port's `PortStatistics`, never handed to its handler nor
/// counted as its traffic; answered only to a peer that proved it runs as this process's
/// user, else dropped (`PortStatistics.statisticsQueriesRefused`).
extension LocalPort {
    /// A statistics query in `frames`, with who sent it, as its connection proved it: no
    /// metadata and no connection descriptor is this process (inproc); an ipc connection's "Peer-Address" ends with the
    /// kernel's `SO_PEERCRED` credentials (`MessageSender.process(fromPeerAddress:)`); any
    /// other (tcp, with or without CURVE) proves no user. Nil for another unknown kind and
    /// for a malformed query (not a header alone with a nonzero correlation id): the
    /// receive path drops it as malformed.
    func libraryQuery(in frames: UnsafeBufferPointer<UnsafeRawBufferPointer>, from socket: ZMQSocket) -> LibraryQuery? {
        guard let (routingID, hasDelimiter, body) = ReturnPath.split(frames),
              let ids = WireCodec.statisticsQueryIDs(body) else { return nil }
        let returnPath = ReturnPath(routingID: RoutingID(routingID), hasDelimiter: hasDelimiter)
        // The last frame: the engine's, which carries the connection's metadata.
        let last = frames.count - 1
        let address = socket.receivedProperty("Peer-Address", ofFrame: last)
            .map { UnsafeRawBufferPointer(start: $0, count: strlen($0)) }
        guard let address else {
            // No metadata: inproc, unless the frame came in on a connection's descriptor
            // (libzmq could not read its peer's address): then it proves nothing.
            let overInproc = socket.receivedSourceDescriptor(ofFrame: last) == nil
            return LibraryQuery(messageID: ids.messageID, correlationID: ids.correlationID, returnPath: returnPath,
                                isSameUser: overInproc && LocalPort.statisticsQueryPeerIsUser(nil, uid: getuid()),
                                peer: overInproc ? "this process" : "a connection without a peer address")
        }
        return LibraryQuery(messageID: ids.messageID, correlationID: ids.correlationID, returnPath: returnPath,
                            isSameUser: LocalPort.statisticsQueryPeerIsUser(address, uid: getuid()),
                            peer: MessageSender.process(fromPeerAddress: address)?.description
                                ?? "peer \(String(decoding: address, as: UTF8.self))")
    }

    /// Whether the peer of a query whose connection's "Peer-Address" is `peerAddress` proved
    /// to run as user `uid`: none (inproc: no metadata) is this process; an ipc peer's ends
    /// with its `SO_PEERCRED` uid, which must be `uid`; anything else (tcp) proves no user.
    static func statisticsQueryPeerIsUser(_ peerAddress: UnsafeRawBufferPointer?, uid: UInt32) -> Bool {
        guard let peerAddress else { return true }
        guard case .process(let peerUID, _, _) = MessageSender.process(fromPeerAddress: peerAddress) else { return false }
        return peerUID == uid
    }

    /// Answers a statistics query with the port's figures now, or drops it (counted and
    /// logged) if its peer did not prove to be this user. `.dropped` either way: nothing
    /// reached the handler, so the loop counts no message handled, and a run that returns
    /// after a handled source goes on.
    func answer(_ query: LibraryQuery) -> PortDelivery {
        guard query.isSameUser else {
            statistics.countRefusedQuery()
            statistics.countDropped()
            RunLoopKitLog.port.debug("statistics query refused", metadata: [
                "port": "\(self)", "peer": "\(query.peer)", "detail": "not this process's user",
            ])
            return .dropped
        }
        let reply = LoopMessage(id: query.messageID, text: PortStatisticsReport(statistics).json)
        do {
            guard socket.isOpen, try socket.send(reply, as: .reply, correlationID: query.correlationID, dontWait: true,
                                                 via: query.returnPath) else {
                RunLoopKitLog.port.debug("statistics reply not sent: the requester's connection is full", metadata: [
                    "port": "\(self)", "peer": "\(query.peer)",
                ])
                return .dropped
            }
        } catch {
            RunLoopKitLog.port.debug("statistics reply not sent", metadata: [
                "port": "\(self)", "peer": "\(query.peer)", "error": "\(error)",
            ])
        }
        return .dropped
    }
}
