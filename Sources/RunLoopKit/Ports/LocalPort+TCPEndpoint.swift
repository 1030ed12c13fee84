/// What `bind(tcp:insecure:)` reads of a tcp endpoint.
extension LocalPort {
    /// The endpoint as libzmq can bind it: the host `localhost`, which libzmq would take as
    /// an interface name and refuse (`ENODEV`), as `127.0.0.1`.
    static func bindable(tcpEndpoint endpoint: String) -> String {
        let prefix = "tcp://localhost:"
        guard endpoint.hasPrefix(prefix) else { return endpoint }
        return "tcp://127.0.0.1:" + endpoint.dropFirst(prefix.count)
    }

    /// Whether a `tcp://host:port` endpoint's host is a loopback address (or `localhost`),
    /// reachable from this machine only.
    static func isLoopback(tcpEndpoint endpoint: String) -> Bool {
        var host = endpoint.dropFirst("tcp://".count)
        if let colon = host.lastIndex(of: ":") { host = host[..<colon] }
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}
