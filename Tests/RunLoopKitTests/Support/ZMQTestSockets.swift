import Foundation
@testable import RunLoopKit

/// An inproc endpoint nobody has bound yet.
func uniqueInprocEndpoint() -> String {
    "inproc://runloopkit-tests.\(UUID().uuidString)"
}

/// A bound PULL and a PUSH connected to it over a fresh inproc endpoint. The PULL's
/// blocking receives give up after 5 s, so a lost message fails the test, not hangs it.
func makePushPull(context: ZMQContext = .shared) throws -> (push: ZMQSocket, pull: ZMQSocket) {
    let pull = try ZMQSocket(context: context, type: .pull)
    try pull.setOption(.receiveTimeout, 5000)
    let endpoint = uniqueInprocEndpoint()
    try pull.bind(endpoint)
    let push = try ZMQSocket(context: context, type: .push)
    try push.connect(endpoint)
    return (push, pull)
}
