import RunLoopCore

/// The owner-thread side of a message stream: installs the stream as the port's handler,
/// pauses the port when the buffer fills and resumes it, and detaches the stream when its
/// consumer stops. Pausing keeps the port in its modes (so they never look empty): its
/// descriptor leaves the poll set and none of its messages is delivered until resumed.
///
/// The stream's handler holds a `HandlerToken`, and only it does: the token's release means
/// the handler is gone, whether the port was invalidated (which drops its handler, on
/// whatever thread closes it) or the handler replaced; the stream then ends.
///
/// Thread safety: `requestResume`, `requestDetach` and `portFinished` from any thread (the
/// first two hand their work to the owner thread as control actions, which run in the
/// owner loop's next pass whatever its mode); the rest on the port's owner thread.
final class PortStreamAttachment<Element: Sendable>: @unchecked Sendable {
    /// The owner thread's loop; weak, written in `init` only.
    private weak var ownerLoop: ThreadRunLoop?
    /// The buffer, which keeps this attachment; weak, written in `init` only.
    private weak var buffer: PortMessageBuffer<Element>?
    /// Makes the stream's handler, which hands each element to `token`.
    private let makeHandler: (HandlerToken<Element>, LocalPort) -> PortHandler

    // Owner thread only (or any thread once the owner is gone, when nothing else touches them).
    /// Kept while the stream is attached: while the port is paused nothing else may hold it.
    private var port: LocalPort?
    /// Whether the stream's handler is the port's handler.
    private var handlerInstalled = false
    /// Whether this stream paused the port.
    private var isPaused = false

    init(port: LocalPort, buffer: PortMessageBuffer<Element>,
         handler makeHandler: @escaping (HandlerToken<Element>, LocalPort) -> PortHandler) {
        self.port = port
        self.buffer = buffer
        self.makeHandler = makeHandler
        ownerLoop = port.ownerLoop
    }

    /// Installs the stream as the port's handler: at once on the owner thread, else at the
    /// owner loop's next pass. Ends the stream if the port or its thread is gone.
    func attach() {
        let scheduled = ownerLoop?.runOnOwnerThread { [self] _ in install() } ?? false
        if !scheduled { buffer?.portFinished() }
    }

    private func install() {
        guard let buffer else { return }
        guard let port, port.isValid else { return buffer.portFinished() }
        let token = HandlerToken(buffer: buffer)
        port.handler = makeHandler(token, port)
        handlerInstalled = true
    }

    /// The handler's release (`HandlerToken.deinit`): forgets the port, and resumes it if
    /// this stream paused it, so that whoever handles the port next gets its messages.
    /// (The release runs where the handler was dropped: the owner thread when it was
    /// replaced; any thread when the port was invalidated, when the port needs no resuming.)
    func portFinished() {
        handlerInstalled = false
        if isPaused, let port {
            isPaused = false
            _ = ownerLoop?.runOnOwnerThread { loop in
                if port.isValid, !loop.isTornDown { loop.setPaused(port, false) }
            }
        }
        port = nil
    }

    // MARK: - Pausing

    /// The buffer is full: pauses the port in its modes. Owner thread, in the handler.
    func pause() {
        guard let port, let loop = ownerLoop, !loop.isTornDown else { return }
        isPaused = loop.setPaused(port, true)
    }

    /// The consumer caught up: brings the port back, at the owner loop's next pass.
    func requestResume() {
        _ = ownerLoop?.runOnOwnerThread { [self] _ in resume() }
    }

    private func resume() {
        buffer?.resumed()
        guard isPaused else { return }
        isPaused = false
        guard let port, port.isValid, let loop = ownerLoop, !loop.isTornDown else { return }
        loop.setPaused(port, false)
    }

    // MARK: - Detaching

    /// The consumer stopped: at the owner loop's next pass, removes the stream's handler
    /// and brings the port back if it was paused.
    func requestDetach() {
        _ = ownerLoop?.runOnOwnerThread { [self] _ in detach() }
    }

    private func detach() {
        if isPaused { resume() }
        // Only if ours is still the handler: a replaced handler is the new owner's.
        if handlerInstalled { port?.handler = nil } // releases the token: portFinished()
        port = nil
    }
}

/// Held by the stream's handler closure alone: its release tells the stream the handler is gone.
final class HandlerToken<Element: Sendable>: Sendable {
    private let buffer: PortMessageBuffer<Element>

    init(buffer: PortMessageBuffer<Element>) { self.buffer = buffer }

    deinit { buffer.portFinished() }

    /// The handler: hands the message to the consumer or the buffer, pausing the port when
    /// it fills; drops it (as a port without a handler would) once the consumer is gone.
    func deliver(_ element: Element, from port: LocalPort?) {
        switch buffer.accept(element) {
        case .handedOver(let consumer): consumer.resume(returning: element)
        case .buffered: break
        case .bufferedAndFull: buffer.attachment?.pause()
        case .refused: port?.drop(.noHandler, "a message came after its stream's consumer stopped")
        }
    }
}
