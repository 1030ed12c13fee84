import Glibc

/// The local end of the route to a tcp peer: where a reply port binds so that a peer on
/// another machine can reach it. The kernel chooses it: `connect(2)` on a UDP socket sends
/// nothing, and `getsockname(2)` then names the source address of the route.
enum TCPRoute {
    /// The host and port of a `tcp://` endpoint: `tcp://host:port`, `tcp://[v6]:port`, or
    /// libzmq's `tcp://source;host:port` (the part after the `;`). Nil for other endpoints.
    static func hostAndPort(of address: PortAddress) -> (host: String, port: String)? {
        guard address.rawValue.hasPrefix("tcp://") else { return nil }
        var rest = address.rawValue.dropFirst("tcp://".count)
        if let semicolon = rest.lastIndex(of: ";") { rest = rest[rest.index(after: semicolon)...] }
        guard let colon = rest.lastIndex(of: ":") else { return nil }
        var host = rest[..<colon]
        let port = rest[rest.index(after: colon)...]
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        guard !host.isEmpty, !port.isEmpty else { return nil }
        return (String(host), String(port))
    }

    /// A tcp endpoint for `host` and `port`, with an IPv6 host in brackets.
    static func endpoint(host: String, port: String) -> String {
        host.contains(":") ? "tcp://[\(host)]:\(port)" : "tcp://\(host):\(port)"
    }

    /// The numeric local address this machine sends from to reach `host` (`192.0.2.7`,
    /// `2001:db8::7`). Throws `invalidAddress` if `host` does not resolve, `system` if no
    /// route leads there. `getaddrinfo(3)` (which may ask DNS for a name), `connect(2)`,
    /// `getsockname(2)`.
    static func localHost(toward host: String, port: String) throws(PortError) -> String {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, port, &hints, &found)
        guard status == 0, let target = found else {
            throw .invalidAddress("tcp://\(host):\(port) (\(String(cString: gai_strerror(status))))")
        }
        defer { freeaddrinfo(found) }
        var local = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        do {
            let family = target.pointee.ai_family
            let descriptor = try systemCall("socket") { socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
            defer { close(descriptor) }
            try systemCall("connect") { connect(descriptor, target.pointee.ai_addr, target.pointee.ai_addrlen) }
            try systemCall("getsockname") {
                withUnsafeMutablePointer(to: &local) { storage in
                    storage.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
                }
            }
        } catch {
            throw .system(error)
        }
        return try numericHost(of: &local, length: length)
    }

    /// `getnameinfo(3)` with `NI_NUMERICHOST`.
    private static func numericHost(of address: inout sockaddr_storage, length: socklen_t) throws(PortError) -> String {
        var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let status = withUnsafePointer(to: &address) { storage in
            storage.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST)
            }
        }
        guard status == 0 else {
            throw .invalidAddress("the local end of a tcp route (getnameinfo: \(String(cString: gai_strerror(status))))")
        }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
