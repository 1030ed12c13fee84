import RunLoopCore
import RunLoopSystem
import RunLoopWire
import RunLoopZMQ
/// A port's messages for `for await`.
extension LocalPort {
    /// The port's messages as an async sequence; see ``PortMessageStream`` for the buffer,
    /// its back-pressure (the port leaves its loop's modes while the buffer is full:
    /// nothing is dropped) and when the stream ends.
    ///
    /// The stream becomes the port's handler: at once when called on the owner thread,
    /// else at the owner loop's next pass (messages delivered before that go to the
    /// handler the port had). Call it on the owner thread (a worker's `setUp`, or an actor
    /// pinned to the owner's loop) to miss no message. The port must be in its loop's
    /// modes for messages to flow, as with a handler. Any thread.
    public func messages(bufferingPolicy: PortMessageStream.BufferingPolicy = .default) -> PortMessageStream {
        let buffer = PortMessageBuffer(policy: bufferingPolicy)
        let attachment = PortStreamAttachment(port: self, buffer: buffer)
        buffer.attachment = attachment
        attachment.attach()
        return PortMessageStream(buffer: buffer)
    }
}
