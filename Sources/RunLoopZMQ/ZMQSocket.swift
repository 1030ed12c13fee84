import RunLoopSystem
import CFramePool
import CZeroMQ
import Glibc

/// A ZeroMQ socket, wrapping `zmq_socket` and `zmq_close`, with endpoints, multipart
/// send and receive, and polling. Options are in `ZMQSocket+Options.swift`.
///
/// Thread safety: none. A ZeroMQ socket is not thread-safe, and RunLoopKit never moves
/// one between threads: it is created, used and released on one thread. So this class
/// is explicitly not `Sendable`.
@usableFromInline package final class ZMQSocket {
    /// The `void *` socket handle. Valid until `deinit`.
    @usableFromInline package let handle: UnsafeMutableRawPointer
    /// The socket's type, as created.
    package let type: ZMQSocketType
    /// Kept so the context outlives the socket: `zmq_ctx_term` would wait for it forever.
    package let context: ZMQContext
    /// The `zmq_msg_t`s that `receive` fills, kept from one message to the next.
    private let frameSlots = ZMQFrameSlots()
    // The socket's thread only; see architecture.md, exclusivity checks.
    /// How many frames `receiveInPlace` lent and `releaseReceived` gives back.
    @exclusivity(unchecked) private var receivedCount = 0
    /// Receives made while `frameSlots`' frames were still lent, innermost last (see
    /// `receiveNested`): almost always none.
    @exclusivity(unchecked) private var nestedReceives: [NestedReceive] = []

    /// A receive made while another's frames were lent: its own slots, and its frame count.
    private struct NestedReceive {
        let slots: ZMQFrameSlots
        let count: Int
    }
    /// Whether `close()` closed it already (then `deinit` does not). The socket's thread
    /// only; see architecture.md, exclusivity checks.
    @exclusivity(unchecked) private var isClosed = false

    /// Whether the socket is still open (`close()` not called). A getter compiled here, with
    /// the field's unchecked exclusivity (hot-path: exclusivity (docs/optimization-tips.md)).
    package var isOpen: Bool { !isClosed }

    /// The buffers `prepareFrame(_:byteCount:)` lends and hands to libzmq (a
    /// CFramePool pool, whose owner thread is this socket's): created by the first frame
    /// that needs one, retired when the socket closes. libzmq gives each buffer back on
    /// whichever thread closes its message, through the pool's own atomics, never through
    /// this field. Nil before the first such frame and after `close()`.
    // The socket's thread only; see architecture.md, exclusivity checks.
    @usableFromInline @exclusivity(unchecked) package private(set) var framePool: OpaquePointer?

    /// The number of frames `receive` accepts by default: a wire message's message frame and
    /// 1024 components in frames of their own, a routing id and a delimiter, with room to spare.
    @usableFromInline package static let defaultMaxFrames = 1100

    /// Creates a socket, via `zmq_socket`, and bounds its linger (`ZMQ_LINGER`) to the
    /// context's `socketLinger`, so that closing it never blocks the context's termination.
    /// `context` nil: the process-wide `ZMQContext.shared`.
    package init(context: ZMQContext? = nil, type: ZMQSocketType) throws(SystemCallError) {
        let context = if let context { context } else { try ZMQContext.shared }
        // A socket made in a forked child would wait for I/O threads that are not there.
        guard context.processID == getpid() else { throw SystemCallError(code: .forkedChild, call: "zmq_socket") }
        let handle = try zmqCall("zmq_socket") { zmq_socket(context.handle, type.rawValue) }
        var linger = context.socketLinger
        do {
            try zmqCall("zmq_setsockopt(ZMQ_LINGER)") {
                zmq_setsockopt(handle, ZMQ_LINGER, &linger, MemoryLayout<Int32>.size)
            }
        } catch {
            zmq_close(handle)
            throw error
        }
        self.handle = handle
        self.type = type
        self.context = context
    }

    /// Closes the socket, via `zmq_close`. Messages not yet sent are kept for at most the
    /// linger time, by libzmq's I/O thread.
    deinit {
        // zmq_close only fails with ENOTSOCK, which a live handle cannot be.
        if !isClosed { zmq_close(handle) }
        retireFramePool()
    }

    /// Closes the socket now rather than when it is released, via `zmq_close`, for an
    /// owner that must wait for libzmq to be done with it (see
    /// `ZMQConnectionMonitor.closeWatched`). The socket must not be used again: its owner
    /// only releases it. A second call does nothing.
    package func close() {
        guard !isClosed else { return }
        isClosed = true
        zmq_close(handle)
        retireFramePool()
    }

    /// Retires the frame pool, if any: its free buffers are freed now, and those still in
    /// libzmq (queued here for the linger time, or at a receiver, unread) free themselves
    /// when libzmq closes their messages; the last frees the pool.
    private func retireFramePool() {
        guard let pool = framePool else { return }
        framePool = nil
        rlk_frame_pool_retire(pool)
    }

    /// Creates the frame pool, on the first frame that needs one; nil if out of memory
    /// (then each frame falls back to libzmq's allocation).
    @usableFromInline
    func makeFramePool() -> OpaquePointer? {
        framePool = rlk_frame_pool_create()
        return framePool
    }

    // MARK: - Endpoints

    /// Binds to an endpoint such as `inproc://name`, `ipc:///path` or `tcp://127.0.0.1:*`,
    /// via `zmq_bind`. Use `lastEndpoint` to learn a wildcard port.
    package func bind(_ endpoint: String) throws(SystemCallError) {
        try checkEndpoint(endpoint, call: "zmq_bind")
        try zmqCall("zmq_bind") { zmq_bind(handle, endpoint) }
    }

    /// Connects to an endpoint, via `zmq_connect`. Succeeds before the peer binds (even for
    /// inproc): libzmq connects, and delivers queued messages, once the peer is there.
    package func connect(_ endpoint: String) throws(SystemCallError) {
        try checkEndpoint(endpoint, call: "zmq_connect")
        try zmqCall("zmq_connect") { zmq_connect(handle, endpoint) }
    }

    /// Stops listening on a bound endpoint, via `zmq_unbind`. Throws `fileNotFound` when
    /// the socket is not bound to it. A wildcard bind is unbound by its `lastEndpoint`.
    package func unbind(_ endpoint: String) throws(SystemCallError) {
        try checkEndpoint(endpoint, call: "zmq_unbind")
        try zmqCall("zmq_unbind") { zmq_unbind(handle, endpoint) }
    }

    /// Disconnects from a connected endpoint, via `zmq_disconnect`. Throws `fileNotFound`
    /// when the socket is not connected to it.
    package func disconnect(_ endpoint: String) throws(SystemCallError) {
        try checkEndpoint(endpoint, call: "zmq_disconnect")
        try zmqCall("zmq_disconnect") { zmq_disconnect(handle, endpoint) }
    }

    /// Rejects an endpoint with a NUL byte: libzmq takes a C string and would silently use
    /// only the part before it, reaching a different endpoint.
    @inline(__always)
    private func checkEndpoint(_ endpoint: String, call: String) throws(SystemCallError) {
        if endpoint.utf8.contains(0) { throw SystemCallError(code: .invalidArgument, call: call) }
    }

    // MARK: - Sending

    /// Sends a multipart message, one `zmq_send` per frame with `ZMQ_SNDMORE` on all but
    /// the last.
    ///
    /// ZeroMQ delivers a multipart message whole or not at all, and admits the rest of a
    /// message once its first frame is accepted. So only the first frame is sent with
    /// `ZMQ_DONTWAIT`; if it would block even after the socket caught up with its peers
    /// (see `isReady(for:)`), nothing was queued and this returns `false`. The
    /// rest are sent blocking, which libzmq never makes wait (if the peer vanishes mid-
    /// message libzmq drops the remainder itself, as it does for any blocking send).
    ///
    /// - Parameter dontWait: return `false` rather than wait when the message cannot be
    ///   queued now (high-water mark reached, or no peer).
    /// - Returns: whether the message was queued; always `true` when not `dontWait`.
    /// - Throws: `invalidArgument` for an empty `frames`; `again` when not `dontWait` and
    ///   the `sendTimeout` passed; any other failure of `zmq_send`.
    ///   A failure after the first frame (such as `terminated`) leaves the message unsent.
    @discardableResult
    package func send(_ frames: [[UInt8]], dontWait: Bool) throws(SystemCallError) -> Bool {
        guard let last = frames.indices.last else {
            throw SystemCallError(code: .invalidArgument, call: "zmq_send")
        }
        for index in frames.indices {
            let flags = ZMQSocket.sendFlags(more: index != last, dontWait: index == 0 && dontWait)
            if flags & ZMQ_DONTWAIT == 0 {
                try zmqCall("zmq_send") { rawSend(frames[index], flags) }
            } else if try zmqNonBlockingCall("zmq_send", { rawSend(frames[index], flags) }) == nil {
                guard try isReady(for: .pollOut),
                      try zmqNonBlockingCall("zmq_send", { rawSend(frames[index], flags) }) != nil
                else { return false } // nothing was queued
            }
        }
        return true
    }

    /// Sends one frame of a message, via `zmq_send`, which copies `bytes`: for callers that
    /// have a frame's bytes in a buffer of their own and want no `[UInt8]` of it.
    ///
    /// The frames of one message must follow each other with `more` set on all but the
    /// last, and only the first may use `dontWait` (see `send(_:dontWait:)`).
    ///
    /// - Returns: `false` if `dontWait` and the frame cannot be queued now, else `true`.
    @inlinable @inline(__always)
    package func sendFrame(_ bytes: UnsafeRawBufferPointer, more: Bool, dontWait: Bool) throws(SystemCallError) -> Bool {
        let flags = ZMQSocket.sendFlags(more: more, dontWait: dontWait)
        if !dontWait {
            try zmqCall("zmq_send") { zmq_send(handle, bytes.baseAddress, bytes.count, flags) }
            return true
        }
        if try zmqNonBlockingCall("zmq_send", { zmq_send(handle, bytes.baseAddress, bytes.count, flags) }) != nil {
            return true
        }
        guard try isReady(for: .pollOut) else { return false }
        return try zmqNonBlockingCall("zmq_send") { zmq_send(handle, bytes.baseAddress, bytes.count, flags) } != nil
    }

    /// `zmq_send` of one frame; for `zmqCall`'s body.
    @inline(__always)
    private func rawSend(_ frame: [UInt8], _ flags: Int32) -> Int32 {
        frame.withUnsafeBytes { zmq_send(handle, $0.baseAddress, $0.count, flags) }
    }

    @usableFromInline @inline(__always)
    static func sendFlags(more: Bool, dontWait: Bool) -> Int32 {
        (more ? ZMQ_SNDMORE : 0) | (dontWait ? ZMQ_DONTWAIT : 0)
    }

    // MARK: - Receiving

    /// Receives one whole multipart message and copies its frames out; see
    /// `receive(dontWait:maxFrames:_:)`, which lends them without copying.
    package func receive(dontWait: Bool, maxFrames: Int = ZMQSocket.defaultMaxFrames) throws(SystemCallError) -> [[UInt8]]? {
        try receive(dontWait: dontWait, maxFrames: maxFrames) { frames in frames.map { [UInt8]($0) } }
    }

    /// Receives one whole multipart message and lends `body` its frames' bytes where
    /// libzmq put them, valid only during the call; via `zmq_msg_recv` (whose result is the
    /// frame's size), `zmq_msg_more` and `zmq_msg_data` (`ZMQFrameSlots`).
    ///
    /// - Parameters:
    ///   - dontWait: return `nil` rather than wait when no message is queued. A `nil` is
    ///     final: before libzmq's non-blocking receive reports `EAGAIN` it processes the
    ///     socket's command mailbox unthrottled (`socket_base_t::recv`, the `ZMQ_DONTWAIT`
    ///     branch), exactly as reading `ZMQ_EVENTS` does, so it sees a peer's latest send
    ///     and re-arms the edge-triggered `ZMQ_FD`. Asking `ZMQ_EVENTS` after it would only
    ///     repeat the same `poll(2)`.
    ///   - maxFrames: the most frames to accept. A longer message is received to its end
    ///     and discarded (so the next receive starts at the next message), and this throws
    ///     `SystemCallError.Code.tooManyFrames` with call `zmq_msg_recv`.
    /// - Returns: what `body` made of the frames (at least one), or `nil` if `dontWait` and
    ///   none is queued. Not `nil` otherwise.
    /// - Throws: `tooManyFrames` (see `maxFrames`); `again` when not `dontWait` and the
    ///   `receiveTimeout` passed; any other failure of `zmq_msg_recv`.
    @inlinable
    package func receive<Result>(dontWait: Bool, maxFrames: Int = ZMQSocket.defaultMaxFrames,
                                 _ body: (UnsafeBufferPointer<UnsafeRawBufferPointer>) -> Result) throws(SystemCallError) -> Result? {
        guard let frames = try receiveInPlace(dontWait: dontWait, maxFrames: maxFrames) else { return nil }
        defer { releaseReceived() }
        return body(frames)
    }

    /// Receives one whole multipart message, as `receive(dontWait:maxFrames:_:)` does, and
    /// returns its frames' bytes where libzmq put them, valid until `releaseReceived()`,
    /// called as soon as the caller is done with them. A receive made before that (a nested
    /// run inside a handler that reads the frames) gets slots of its own and is given back
    /// first.
    /// The ports' receive path: with no closure between the frames and what they decode to,
    /// the decoded message is made once and moved, never copied or held in an optional.
    @usableFromInline
    package func receiveInPlace(dontWait: Bool, maxFrames: Int = ZMQSocket.defaultMaxFrames)
        throws(SystemCallError) -> UnsafeBufferPointer<UnsafeRawBufferPointer>? {
        guard receivedCount == 0 else { return try receiveNested(dontWait: dontWait, maxFrames: maxFrames) }
        guard let count = try receive(into: frameSlots, dontWait: dontWait, maxFrames: maxFrames) else { return nil }
        receivedCount = count
        return frameSlots.lend(count)
    }

    /// A receive while the last one's frames are still lent (a handler that reads its
    /// message in place and runs the loop meanwhile): into slots of its own, given back
    /// first by `releaseReceived()`.
    private func receiveNested(dontWait: Bool, maxFrames: Int)
        throws(SystemCallError) -> UnsafeBufferPointer<UnsafeRawBufferPointer>? {
        let slots = ZMQFrameSlots()
        guard let count = try receive(into: slots, dontWait: dontWait, maxFrames: maxFrames) else { return nil }
        nestedReceives.append(NestedReceive(slots: slots, count: count))
        return slots.lend(count)
    }

    /// Receives one whole multipart message into `slots`; returns its frame count, or nil
    /// if `dontWait` and none is queued.
    @inline(__always) // the ports' receive path, as it was before nested receives shared it
    private func receive(into slots: ZMQFrameSlots, dontWait: Bool, maxFrames: Int) throws(SystemCallError) -> Int? {
        let first = slots.slot(0)
        if !dontWait {
            slots.noteSize(try zmqCall("zmq_msg_recv") { zmq_msg_recv(first, handle, 0) }, of: 0)
        } else if let size = try zmqNonBlockingCall("zmq_msg_recv", { zmq_msg_recv(first, handle, ZMQ_DONTWAIT) }) {
            slots.noteSize(size, of: 0)
        } else {
            return nil
        }
        var count = 1
        do throws(SystemCallError) {
            var tooMany = false
            var current = first
            while zmq_msg_more(current) != 0 {
                // Past `maxFrames`, the rest is received into the last slot and discarded.
                if count < maxFrames {
                    current = slots.slot(count)
                    count += 1
                } else {
                    tooMany = true
                }
                // The rest of a message arrives with its first frame, so this never waits.
                let slot = current
                let size = try zmqCall("zmq_msg_recv") { zmq_msg_recv(slot, handle, 0) }
                // Noted for a discarded frame too: `release` keeps or closes a slot by
                // the size of what it holds.
                slots.noteSize(size, of: count - 1)
            }
            if tooMany { throw SystemCallError(code: .tooManyFrames, call: "zmq_msg_recv") }
        } catch {
            slots.release(count) // nothing is lent
            throw error
        }
        return count
    }

    /// The `index`th frame `receiveInPlace(dontWait:maxFrames:)` lent, as libzmq's message
    /// (for its metadata: see `receivedProperty(_:ofFrame:)`); valid until `releaseReceived()`.
    /// The innermost receive's, when one was made while another's frames were lent.
    package func receivedFrame(_ index: Int) -> UnsafeMutablePointer<zmq_msg_t> {
        if let nested = nestedReceives.last {
            precondition(index < nested.count, "ZMQSocket: frame \(index) was not received")
            return nested.slots.slot(index)
        }
        precondition(index < receivedCount, "ZMQSocket: frame \(index) was not received")
        return frameSlots.slot(index)
    }

    /// The descriptor of the connection the lent frame `index` came in on (`ZMQ_SRCFD`), or
    /// nil for one with none (inproc). libzmq 4.3 still answers this deprecated property;
    /// a connection's descriptor, with its monitor's `ZMQ_EVENT_DISCONNECTED`, tells a
    /// port which requester's connection went (see `ZMQDisconnectMonitor`).
    package func receivedSourceDescriptor(ofFrame index: Int) -> Int32? {
        let descriptor = zmq_msg_get(receivedFrame(index), ZMQ_SRCFD)
        return descriptor >= 0 ? descriptor : nil
    }

    /// Gives back the frames `receiveInPlace(dontWait:maxFrames:)` lent.
    @usableFromInline
    package func releaseReceived() {
        if let nested = nestedReceives.popLast() { return nested.slots.release(nested.count) }
        frameSlots.release(receivedCount)
        receivedCount = 0
    }

    /// Whether `ZMQ_EVENTS` has `event`: asked after a non-blocking send found the queue
    /// full, before believing it.
    ///
    /// libzmq learns that a peer read messages from commands in the socket's mailbox, and
    /// a non-blocking send skips the mailbox if it looked at it in the last few million
    /// CPU cycles (about a millisecond), so it can see a queue full that the peer has
    /// drained. Reading `ZMQ_EVENTS` always processes the mailbox, at the cost of a
    /// `poll(2)` and a `getpid(2)`, so it is asked only on this slow path. (A non-blocking
    /// receive needs no such check: see `receive(dontWait:maxFrames:_:)`.)
    @inline(__always)
    @usableFromInline
    func isReady(for event: ZMQEvents) throws(SystemCallError) -> Bool {
        try events.contains(event)
    }
}

/// A ZeroMQ socket belongs to one thread; see `ZMQSocket`.
@available(*, unavailable)
extension ZMQSocket: Sendable {}
