/// A port's requests delivered with their reply rights and not yet answered, by the
/// connection they came in on (its routing id) and their correlation id: a cancel is
/// looked up under its own connection only, so that a peer cannot cancel another's
/// requests, and a connection that goes takes its entries with it. Owner thread only.
struct OutstandingRequestTable {
    private var byConnection: [RoutingID: [UInt64: OutstandingRequest]] = [:]
    /// The connection with requests outstanding that came in on each descriptor (ipc, tcp).
    private var byDescriptor: [Int32: RoutingID] = [:]
    /// How many entries there are.
    private(set) var count = 0

    /// Keeps `request` until it is answered or cancelled.
    mutating func insert(_ request: OutstandingRequest) {
        let previous = byConnection[request.returnPath.routingID, default: [:]]
            .updateValue(request, forKey: request.correlationID)
        if previous == nil { count += 1 }
        if let descriptor = request.sourceDescriptor { byDescriptor[descriptor] = request.returnPath.routingID }
    }

    /// Forgets `request` (answered). No-op if it was forgotten already.
    mutating func remove(_ request: OutstandingRequest) {
        let routingID = request.returnPath.routingID
        guard let entry = byConnection[routingID]?[request.correlationID], entry === request else { return }
        byConnection[routingID]![request.correlationID] = nil
        count -= 1
        if byConnection[routingID]!.isEmpty { forget(routingID, descriptor: request.sourceDescriptor) }
    }

    /// The request `correlationID` that came in on `routingID`'s connection, forgotten; nil if none.
    mutating func take(_ correlationID: UInt64, from routingID: RoutingID) -> OutstandingRequest? {
        guard let request = byConnection[routingID]?.removeValue(forKey: correlationID) else { return nil }
        count -= 1
        if byConnection[routingID]!.isEmpty { forget(routingID, descriptor: request.sourceDescriptor) }
        return request
    }

    /// Forgets a connection left with no request outstanding.
    private mutating func forget(_ routingID: RoutingID, descriptor: Int32?) {
        byConnection[routingID] = nil
        if let descriptor, byDescriptor[descriptor] == routingID { byDescriptor[descriptor] = nil }
    }

    /// Every request of `routingID`'s connection, forgotten: the connection went.
    mutating func takeAll(from routingID: RoutingID) -> [OutstandingRequest] {
        guard let requests = byConnection.removeValue(forKey: routingID) else { return [] }
        count -= requests.count
        if let descriptor = requests.values.first?.sourceDescriptor, byDescriptor[descriptor] == routingID {
            byDescriptor[descriptor] = nil
        }
        return Array(requests.values)
    }

    /// The connection with requests outstanding that came in on `descriptor`.
    func connection(onDescriptor descriptor: Int32) -> RoutingID? { byDescriptor[descriptor] }

    /// Every request of the connection that came in on `descriptor`, forgotten: it went.
    mutating func takeAll(onDescriptor descriptor: Int32) -> [OutstandingRequest] {
        guard let routingID = byDescriptor.removeValue(forKey: descriptor) else { return [] }
        return takeAll(from: routingID)
    }

    /// Every request, forgotten: the port closes.
    mutating func takeEveryRequest() -> [OutstandingRequest] {
        let all = byConnection.values.flatMap(\.values)
        byConnection.removeAll()
        byDescriptor.removeAll()
        count = 0
        return all
    }

    /// How many connections have requests outstanding, and how many descriptors are mapped to one.
    var connectionCount: Int { byConnection.count }
    var descriptorCount: Int { byDescriptor.count }
}
