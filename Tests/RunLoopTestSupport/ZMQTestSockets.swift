import Foundation
import RunLoopSystem
import RunLoopZMQ

/// An inproc endpoint nobody has bound yet.
package func uniqueInprocEndpoint() -> String {
    "inproc://runloopkit-tests.\(UUID().uuidString)"
}

/// A bound PULL and a PUSH connected to it over a fresh inproc endpoint. The PULL's
/// blocking receives give up after 5 s, so a lost message fails the test, not hangs it.
package func makePushPull(context: ZMQContext? = nil) throws -> (push: ZMQSocket, pull: ZMQSocket) {
    let pull = try ZMQSocket(context: context, type: .pull)
    try pull.setOption(.receiveTimeout, 5000)
    let endpoint = uniqueInprocEndpoint()
    try pull.bind(endpoint)
    let push = try ZMQSocket(context: context, type: .push)
    try push.connect(endpoint)
    return (push, pull)
}

/// Waits (up to `limit`) until a ROUTER socket with `ZMQ_ROUTER_MANDATORY` knows that the
/// peer with `routingID` is gone, as libzmq learns it: asynchronously, from a command its
/// I/O thread posts to the socket. Each try processes the socket's commands (`events`)
/// and sends an empty probe to the peer, which fails with `hostUnreachable` once libzmq
/// has taken the connection down (a probe sent earlier goes to a connection that is
/// closing, and is lost with it); between tries it sleeps in `poll(2)` on the socket's
/// descriptor, which the next command wakes. True once the peer is unroutable.
package func waitUntilUnroutable(_ routingID: [UInt8], from router: ZMQSocket, limit: Duration = .seconds(10)) throws -> Bool {
    let deadline = Deadline.after(limit)
    let descriptor = try router.fileDescriptor
    while Deadline.now() < deadline {
        _ = try router.events
        do {
            let accepted = try routingID.withUnsafeBytes { id throws(SystemCallError) in try router.sendFrame(id, more: true, dontWait: true) }
            if accepted { _ = try [UInt8]().withUnsafeBytes { empty throws(SystemCallError) in try router.sendFrame(empty, more: false, dontWait: true) } }
        } catch let error as SystemCallError where error.code == .hostUnreachable {
            return true
        }
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        _ = poll(&entry, 1, 10)
    }
    return false
}
