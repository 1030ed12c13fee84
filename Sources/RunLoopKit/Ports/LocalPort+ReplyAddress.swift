/// Where a request's reply comes back, for the two requesters (`ReplyPort` and
/// `AsyncRequester`). Owner thread.
extension LocalPort {
    /// The address `target` can reply to this port at: the inproc address for a port of
    /// this process; for a tcp target, a tcp address on the local end of the route to it
    /// (bound on first use, so that a peer on another machine can reach it); else the ipc
    /// address, registering the port under `privateName()` on first use.
    ///
    /// Throws `invalidAddress` for a CURVE target over tcp: its reply would come back
    /// unencrypted, since a request cannot carry the key a reply port would need.
    func replyAddress(toward target: RemotePort, privateName: () -> String) throws(PortError) -> RemotePort {
        let address = target.address
        if address.isInProcess || PortDirectory.shared.inProcessAlias(of: address) != nil {
            return RemotePort(inProcessAddress)
        }
        if let (host, port) = TCPRoute.hostAndPort(of: address) {
            guard target.curveServerKey == nil else {
                throw .invalidAddress("\(address): requests to a CURVE port over tcp would get unencrypted replies")
            }
            if let bound = tcpReplyAddresses[address] { return RemotePort(bound) }
            let local = try TCPRoute.localHost(toward: host, port: port)
            let bound: PortAddress
            if let existing = tcpAddresses.first(where: { TCPRoute.hostAndPort(of: $0)?.host == local }) {
                bound = existing
            } else {
                bound = try bind(tcp: TCPRoute.endpoint(host: local, port: "*"))
            }
            tcpReplyAddresses[address] = bound
            return RemotePort(bound)
        }
        if registration == nil { try register(name: privateName()) }
        guard let registration else { throw .invalidated }
        return RemotePort(registration.ipcAddress)
    }
}
