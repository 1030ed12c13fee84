import RunLoopSystem
import CZeroMQ

/// A socket option with the Swift type of its value, for `ZMQSocket.setOption` and
/// `ZMQSocket.option`: `try socket.setOption(.sendHighWaterMark, 1)`.
package struct ZMQSocketOption<Value: ZMQSocketOptionValue>: Sendable {
    /// The `ZMQ_*` option name passed to `zmq_setsockopt` and `zmq_getsockopt`.
    package let name: Int32
}

extension ZMQSocketOption where Value == Int32 {
    /// `ZMQ_LINGER`, in milliseconds: how long unsent messages are kept after the socket
    /// closes; -1 is forever. Sockets start with their context's `socketLinger`.
    package static var linger: Self { Self(name: ZMQ_LINGER) }
    /// `ZMQ_SNDHWM`: the most messages queued for sending per peer; 0 is no limit.
    package static var sendHighWaterMark: Self { Self(name: ZMQ_SNDHWM) }
    /// `ZMQ_RCVHWM`: the most messages queued for receiving per peer; 0 is no limit.
    package static var receiveHighWaterMark: Self { Self(name: ZMQ_RCVHWM) }
    /// `ZMQ_SNDTIMEO`, in milliseconds: how long a blocking send waits before `again`;
    /// -1 (the default) is forever.
    package static var sendTimeout: Self { Self(name: ZMQ_SNDTIMEO) }
    /// `ZMQ_RCVTIMEO`, in milliseconds: how long a blocking receive waits before `again`;
    /// -1 (the default) is forever.
    package static var receiveTimeout: Self { Self(name: ZMQ_RCVTIMEO) }
    /// `ZMQ_RECONNECT_IVL`, in milliseconds: how long a connecting socket waits before it
    /// tries again after its peer went or refused (100 by default).
    package static var reconnectInterval: Self { Self(name: ZMQ_RECONNECT_IVL) }
    /// `ZMQ_HANDSHAKE_IVL`, in milliseconds: a connection whose ZMTP handshake (greeting,
    /// security mechanism, ZAP) is not done this long after it was made is closed; 0 is
    /// never (libzmq's default is 30,000). Set before binding: a listener's connections
    /// take the value it had when it was bound.
    package static var handshakeInterval: Self { Self(name: ZMQ_HANDSHAKE_IVL) }
    /// `ZMQ_HEARTBEAT_IVL`, in milliseconds: send a ZMTP PING on each connection this often;
    /// 0 (the default) sends none. Set before connecting.
    package static var heartbeatInterval: Self { Self(name: ZMQ_HEARTBEAT_IVL) }
    /// `ZMQ_HEARTBEAT_TIMEOUT`, in milliseconds: a connection that receives nothing this
    /// long after a PING is closed (the monitor reports it disconnected); 0 is the interval.
    package static var heartbeatTimeout: Self { Self(name: ZMQ_HEARTBEAT_TIMEOUT) }
    /// `ZMQ_HEARTBEAT_TTL`, in milliseconds (deciseconds on the wire, at most 6,553,599):
    /// sent in each PING, it tells the peer to close the connection if it hears nothing
    /// from this socket for that long.
    package static var heartbeatTTL: Self { Self(name: ZMQ_HEARTBEAT_TTL) }
    /// `ZMQ_TCP_KEEPALIVE`: 1 turns the kernel's keepalive (`SO_KEEPALIVE`) on for the
    /// socket's tcp connections, 0 off, -1 (the default) leaves the system's setting. Set
    /// before connecting or binding, as the three below.
    package static var tcpKeepalive: Self { Self(name: ZMQ_TCP_KEEPALIVE) }
    /// `ZMQ_TCP_KEEPALIVE_IDLE` (`TCP_KEEPIDLE`), in seconds: how long a connection is
    /// quiet before the first probe.
    package static var tcpKeepaliveIdle: Self { Self(name: ZMQ_TCP_KEEPALIVE_IDLE) }
    /// `ZMQ_TCP_KEEPALIVE_INTVL` (`TCP_KEEPINTVL`), in seconds: between unanswered probes.
    package static var tcpKeepaliveInterval: Self { Self(name: ZMQ_TCP_KEEPALIVE_INTVL) }
    /// `ZMQ_TCP_KEEPALIVE_CNT` (`TCP_KEEPCNT`): how many unanswered probes close the connection.
    package static var tcpKeepaliveCount: Self { Self(name: ZMQ_TCP_KEEPALIVE_CNT) }
}

extension ZMQSocketOption where Value == Int64 {
    /// `ZMQ_MAXMSGSIZE`, in bytes: a peer sending a larger message over tcp or ipc is
    /// disconnected; -1 (the default) is no limit. Not enforced for inproc, whose messages
    /// are never decoded.
    package static var maxMessageSize: Self { Self(name: ZMQ_MAXMSGSIZE) }
}

extension ZMQSocketOption where Value == Bool {
    /// `ZMQ_IMMEDIATE`: queue messages only to completed connections, so that sends to a
    /// peer that is not there yet block (or fail with `dontWait`) instead of queueing.
    package static var immediate: Self { Self(name: ZMQ_IMMEDIATE) }
    /// `ZMQ_IPV6`: accept IPv6 tcp endpoints (libzmq refuses them by default).
    package static var ipv6: Self { Self(name: ZMQ_IPV6) }
    /// `ZMQ_CURVE_SERVER`: act as the CURVE server; needs `curveSecretKey`.
    package static var curveServer: Self { Self(name: ZMQ_CURVE_SERVER) }
    /// `ZMQ_ROUTER_MANDATORY`: a ROUTER's send to a peer it does not know fails with
    /// `hostUnreachable`, and one to a peer at its high-water mark with `again`, instead of
    /// being dropped without a word.
    package static var routerMandatory: Self { Self(name: ZMQ_ROUTER_MANDATORY) }
}

extension ZMQSocketOption where Value == [UInt8] {
    /// `ZMQ_ROUTING_ID`: the id a ROUTER peer knows this socket's connections by (1 to 255
    /// bytes, not starting with a zero byte); set before connecting. Unset, a ROUTER makes
    /// one up per connection.
    package static var routingID: Self { Self(name: ZMQ_ROUTING_ID) }
}

extension ZMQSocketOption where Value == ZMQCurveKey {
    /// `ZMQ_CURVE_PUBLICKEY`: this socket's long-term public key (clients).
    package static var curvePublicKey: Self { Self(name: ZMQ_CURVE_PUBLICKEY) }
    /// `ZMQ_CURVE_SECRETKEY`: this socket's long-term secret key (clients and servers).
    package static var curveSecretKey: Self { Self(name: ZMQ_CURVE_SECRETKEY) }
    /// `ZMQ_CURVE_SERVERKEY`: the server's public key; setting it makes the socket a
    /// CURVE client.
    package static var curveServerKey: Self { Self(name: ZMQ_CURVE_SERVERKEY) }
}

/// A Swift type that a socket option's value is read and written as.
package protocol ZMQSocketOptionValue {
    /// Writes `value` into a buffer and passes it to `body`, with its size in bytes.
    static func withOptionBytes<R>(
        _ value: Self, _ body: (UnsafeRawPointer, Int) throws(SystemCallError) -> R
    ) throws(SystemCallError) -> R
    /// Reads a value through `read`, which fills a buffer and returns the bytes it wrote.
    static func fromOptionBytes(
        _ read: (UnsafeMutableRawPointer, Int) throws(SystemCallError) -> Int
    ) throws(SystemCallError) -> Self
}

extension ZMQSocket {
    /// Sets a socket option, via `zmq_setsockopt`.
    package func setOption<Value>(_ option: ZMQSocketOption<Value>, _ value: Value) throws(SystemCallError) {
        _ = try Value.withOptionBytes(value) { bytes, size throws(SystemCallError) in
            try zmqCall("zmq_setsockopt") { zmq_setsockopt(handle, option.name, bytes, size) }
        }
    }

    /// Reads a socket option, via `zmq_getsockopt`.
    package func option<Value>(_ option: ZMQSocketOption<Value>) throws(SystemCallError) -> Value {
        try Value.fromOptionBytes { buffer, capacity throws(SystemCallError) in
            try getRawOption(option.name, buffer, capacity)
        }
    }

    /// The endpoint the socket last bound or connected to (`ZMQ_LAST_ENDPOINT`), via
    /// `zmq_getsockopt`: after binding `tcp://127.0.0.1:*`, it names the port chosen.
    /// Empty before any bind or connect.
    package var lastEndpoint: String {
        get throws(SystemCallError) {
            // libzmq fails with EINVAL, not truncation, when the buffer is too small;
            // endpoints are at most a few hundred bytes (ipc paths are limited to 107).
            try withUnsafeTemporaryAllocation(byteCount: 1024, alignment: 1) { buffer throws(SystemCallError) in
                let count = try getRawOption(ZMQ_LAST_ENDPOINT, buffer.baseAddress!, buffer.count)
                // The count includes the terminating NUL.
                let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<max(0, count - 1)])
                return String(decoding: bytes, as: UTF8.self)
            }
        }
    }

    /// The descriptor that signals the socket's state may have changed (`ZMQ_FD`), via
    /// `zmq_getsockopt`, for adding to an epoll set.
    ///
    /// It is edge-triggered and says nothing by itself: after it polls readable, ask
    /// `events`, and keep receiving until `events` lacks `.pollIn`, or a message can sit
    /// unnoticed. Never read from it, write to it or close it: libzmq owns it.
    package var fileDescriptor: Int32 {
        get throws(SystemCallError) {
            var fd: Int32 = -1
            var size = MemoryLayout<Int32>.size
            try zmqCall("zmq_getsockopt(ZMQ_FD)") { zmq_getsockopt(handle, ZMQ_FD, &fd, &size) }
            return fd
        }
    }

    /// Whether a message can be received or sent now without blocking (`ZMQ_EVENTS`), via
    /// `zmq_getsockopt`. Reading it also processes libzmq's pending commands for the
    /// socket, which is what re-arms `fileDescriptor`; that costs a `poll(2)` (about a
    /// microsecond), more than a small send or receive.
    package var events: ZMQEvents {
        get throws(SystemCallError) {
            var events: Int32 = 0
            var size = MemoryLayout<Int32>.size
            try zmqCall("zmq_getsockopt(ZMQ_EVENTS)") { zmq_getsockopt(handle, ZMQ_EVENTS, &events, &size) }
            return ZMQEvents(rawValue: events)
        }
    }

    /// `zmq_getsockopt` into a buffer; returns the number of bytes written.
    private func getRawOption(_ name: Int32, _ buffer: UnsafeMutableRawPointer, _ capacity: Int) throws(SystemCallError) -> Int {
        var size = capacity
        try zmqCall("zmq_getsockopt") { zmq_getsockopt(handle, name, buffer, &size) }
        return size
    }
}

extension Int32: ZMQSocketOptionValue {
    package static func withOptionBytes<R>(
        _ value: Int32, _ body: (UnsafeRawPointer, Int) throws(SystemCallError) -> R
    ) throws(SystemCallError) -> R {
        var value = value
        return try body(&value, MemoryLayout<Int32>.size)
    }

    package static func fromOptionBytes(
        _ read: (UnsafeMutableRawPointer, Int) throws(SystemCallError) -> Int
    ) throws(SystemCallError) -> Int32 {
        var value: Int32 = 0
        _ = try read(&value, MemoryLayout<Int32>.size)
        return value
    }
}

extension Int64: ZMQSocketOptionValue {
    package static func withOptionBytes<R>(
        _ value: Int64, _ body: (UnsafeRawPointer, Int) throws(SystemCallError) -> R
    ) throws(SystemCallError) -> R {
        var value = value
        return try body(&value, MemoryLayout<Int64>.size)
    }

    package static func fromOptionBytes(
        _ read: (UnsafeMutableRawPointer, Int) throws(SystemCallError) -> Int
    ) throws(SystemCallError) -> Int64 {
        var value: Int64 = 0
        _ = try read(&value, MemoryLayout<Int64>.size)
        return value
    }
}

/// Boolean options are C `int`s, 0 or 1.
extension Bool: ZMQSocketOptionValue {
    package static func withOptionBytes<R>(
        _ value: Bool, _ body: (UnsafeRawPointer, Int) throws(SystemCallError) -> R
    ) throws(SystemCallError) -> R {
        try Int32.withOptionBytes(value ? 1 : 0, body)
    }

    package static func fromOptionBytes(
        _ read: (UnsafeMutableRawPointer, Int) throws(SystemCallError) -> Int
    ) throws(SystemCallError) -> Bool {
        try Int32.fromOptionBytes(read) != 0
    }
}

/// CURVE keys are set and read as their 32 binary bytes.
extension ZMQCurveKey: ZMQSocketOptionValue {
    // Temporary buffers rather than the array's own: `Array.withUnsafeBytes` only rethrows
    // `any Error`, which would lose the typed `SystemCallError`.
    package static func withOptionBytes<R>(
        _ value: ZMQCurveKey, _ body: (UnsafeRawPointer, Int) throws(SystemCallError) -> R
    ) throws(SystemCallError) -> R {
        try withUnsafeTemporaryAllocation(byteCount: byteCount, alignment: 1) { buffer throws(SystemCallError) in
            buffer.copyBytes(from: value.bytes)
            return try body(UnsafeRawPointer(buffer.baseAddress!), buffer.count)
        }
    }

    package static func fromOptionBytes(
        _ read: (UnsafeMutableRawPointer, Int) throws(SystemCallError) -> Int
    ) throws(SystemCallError) -> ZMQCurveKey {
        try withUnsafeTemporaryAllocation(byteCount: byteCount, alignment: 1) { buffer throws(SystemCallError) in
            let count = try read(buffer.baseAddress!, buffer.count)
            guard count == byteCount, let key = ZMQCurveKey(bytes: Array(buffer)) else {
                throw SystemCallError(code: .invalidArgument, call: "zmq_getsockopt")
            }
            return key
        }
    }
}

/// Byte-string options (`ZMQ_ROUTING_ID`), at most 255 bytes.
extension [UInt8]: ZMQSocketOptionValue {
    package static func withOptionBytes<R>(
        _ value: [UInt8], _ body: (UnsafeRawPointer, Int) throws(SystemCallError) -> R
    ) throws(SystemCallError) -> R {
        try withUnsafeTemporaryAllocation(byteCount: Swift.max(value.count, 1), alignment: 1) { buffer throws(SystemCallError) in
            buffer.copyBytes(from: value)
            return try body(UnsafeRawPointer(buffer.baseAddress!), value.count)
        }
    }

    package static func fromOptionBytes(
        _ read: (UnsafeMutableRawPointer, Int) throws(SystemCallError) -> Int
    ) throws(SystemCallError) -> [UInt8] {
        try withUnsafeTemporaryAllocation(byteCount: 256, alignment: 1) { buffer throws(SystemCallError) in
            let count = try read(buffer.baseAddress!, buffer.count)
            return [UInt8](UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        }
    }
}
