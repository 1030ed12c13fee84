/// A port's requests delivered with their reply rights and not yet answered, by the
/// connection they came in on (its routing id) and their correlation id: a cancel is
/// looked up under its own connection only, so that a peer cannot cancel another's
/// requests, and a connection that goes takes its entries with it. Owner thread only.
struct OutstandingRequestTable {
    private var byConnection: [RoutingID: [UInt64: OutstandingRequest]] = [:]
    /// How many entries there are.
    private(set) var count = 0

    /// Keeps `request` until it is answered or cancelled.
    mutating func insert(_ request: OutstandingRequest) {
        let previous = byConnection[request.returnPath.routingID, default: [:]]
            .updateValue(request, forKey: request.correlationID)
        if previous == nil { count += 1 }
    }

    /// Forgets `request` (answered). No-op if it was forgotten already.
    mutating func remove(_ request: OutstandingRequest) {
        let routingID = request.returnPath.routingID
        guard let entry = byConnection[routingID]?[request.correlationID], entry === request else { return }
        byConnection[routingID]![request.correlationID] = nil
        if byConnection[routingID]!.isEmpty { byConnection[routingID] = nil }
        count -= 1
    }

    /// The request `correlationID` that came in on `routingID`'s connection, forgotten; nil if none.
    mutating func take(_ correlationID: UInt64, from routingID: RoutingID) -> OutstandingRequest? {
        guard let request = byConnection[routingID]?.removeValue(forKey: correlationID) else { return nil }
        if byConnection[routingID]!.isEmpty { byConnection[routingID] = nil }
        count -= 1
        return request
    }

    /// Every request of `routingID`'s connection, forgotten: the connection went.
    mutating func takeAll(from routingID: RoutingID) -> [OutstandingRequest] {
        guard let requests = byConnection.removeValue(forKey: routingID) else { return [] }
        count -= requests.count
        return Array(requests.values)
    }

    /// Cancels every request and forgets them all: the port closed.
    mutating func cancelAll() {
        let all = byConnection.values.flatMap(\.values)
        byConnection.removeAll()
        count = 0
        for request in all { request.cancel() }
    }

    /// How many connections have requests outstanding.
    var connectionCount: Int { byConnection.count }
}
