/// A port's messages as an `AsyncSequence` (`LocalPort.messages()`); see ``PortStream`` for
/// the buffer, its back-pressure and when the stream ends.
///
/// A request sent to the port is not delivered: it is answered at once with a no reply
/// (`PortError.noReply` for its requester) and counted as `noHandler`. Serve requests with
/// `requests()` or a handler.
public typealias PortMessageStream = PortStream<LoopMessage>

/// A port's messages for `for await`.
extension LocalPort {
    /// The port's messages as an async sequence; see ``PortStream`` for the buffer,
    /// its back-pressure (the port is paused while the buffer is full: nothing is dropped)
    /// and when the stream ends.
    ///
    /// The stream becomes the port's handler: at once when called on the owner thread,
    /// else at the owner loop's next pass (messages delivered before that go to the
    /// handler the port had). Call it on the owner thread (a worker's `setUp`, or an actor
    /// pinned to the owner's loop) to miss no message. The port must be in its loop's
    /// modes for messages to flow, as with a handler. Any thread.
    public func messages(bufferingPolicy: PortMessageStream.BufferingPolicy = .default) -> PortMessageStream {
        stream(bufferingPolicy) { token, port in
            .deferring { [weak port] message, right in
                guard right == nil else {
                    return port?.drop(.noHandler, "a request to a message stream, answered with a no reply") ?? ()
                }
                token.deliver(message, from: port)
            }
        }
    }
}
