import RunLoopSystem
import RunLoopZMQ

/// The kernel's keepalive on every tcp connection a port makes or accepts: the watch a tcp
/// peer has unless its `RemotePort` sets ZMTP heartbeats (`PortHeartbeat`). A probe after
/// `idleSeconds` quiet, then one every `intervalSeconds`; `probes` unanswered in a row
/// close the connection (its requests then fail with `remoteInvalid`). The peer's kernel
/// answers them however far behind its port is, so a receiver that falls behind is never
/// taken for gone; a machine or network that vanished is, within 5 s of the connection
/// going quiet. Only while nothing is in flight: unacknowledged data is the kernel's
/// retransmission's to give up on.
enum TCPKeepalive {
    static let idleSeconds: Int32 = 2
    static let intervalSeconds: Int32 = 1
    static let probes: Int32 = 3

    /// Turns it on for the tcp connections `socket` makes or accepts from now on.
    static func enable(on socket: ZMQSocket) throws(SystemCallError) {
        try socket.setOption(.tcpKeepalive, 1)
        try socket.setOption(.tcpKeepaliveIdle, idleSeconds)
        try socket.setOption(.tcpKeepaliveInterval, intervalSeconds)
        try socket.setOption(.tcpKeepaliveCount, probes)
    }
}
