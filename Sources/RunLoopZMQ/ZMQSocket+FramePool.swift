import CFramePool
import CZeroMQ
import RunLoopSystem

/// Sending a frame filled in place, from the socket's frame pool (`framePool`, made and
/// retired in ZMQSocket.swift): the buffers handed to libzmq with `zmq_msg_init_data`.
extension ZMQSocket {
    /// The room for one frame being written in place: `prepareFrame(_:byteCount:)` makes
    /// it ready and says where the bytes go, the caller writes them, and
    /// `sendFrame(_:byteCount:more:dontWait:)` sends it. Two calls rather than one taking a
    /// closure: the caller's writing stays in its own code, where the compiler knows what
    /// it writes; a fill closure was left out of line, one function for every kind of
    /// message (docs/experiments/2026-12-07-one-send-path.md).
    @usableFromInline package typealias FrameSlot = zmq_msg_t

    /// Makes `slot` (uninitialized) ready for a frame of `byteCount` bytes and returns
    /// where they go, with no copy of the caller's: for a frame made from parts, or
    /// encoded straight into the buffer libzmq sends. The caller writes exactly
    /// `byteCount` bytes there, then sends the frame with `sendFrame(_:byteCount:more:dontWait:)`
    /// (which releases it if it is not queued); nothing may come between that throws.
    ///
    /// Where the bytes go, by size:
    /// - at most `verySmallFrameSize` (33 on 64-bit): the slot's own bytes, and `zmq_send`,
    ///   which copies them into a `zmq_msg_t` of its own. Nothing is allocated.
    /// - up to `largestFastBinFrameSize` (80): `zmq_msg_init_size`, filled in place. libzmq's
    ///   `40 + byteCount` bytes then stay in glibc's fast bins, and one allocation costs less
    ///   than the pool's buffer and libzmq's control block together.
    /// - up to 64 KiB: a buffer from the socket's frame pool (`framePool`), handed to
    ///   libzmq with `zmq_msg_init_data` (libzmq allocates only its 40-byte control block);
    ///   libzmq gives it back to the pool from the thread that closes the message. In a
    ///   steady state nothing is allocated for it. Without `zmq_msg_init_data`, libzmq
    ///   would allocate `40 + byteCount` bytes for every frame, which the receiving thread
    ///   frees: from about 80 bytes on, outside glibc's fast bins, both threads then take
    ///   the arena's lock, which halves the throughput of small frames.
    /// - larger, or when the pool's class is at its bound: `zmq_msg_init_size`, libzmq's
    ///   allocation, filled in place.
    @inlinable
    package func prepareFrame(_ slot: UnsafeMutablePointer<FrameSlot>,
                              byteCount: Int) throws(SystemCallError) -> UnsafeMutableRawBufferPointer {
        if byteCount <= ZMQSocket.verySmallFrameSize {
            return UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(slot), count: byteCount)
        }
        if byteCount > ZMQSocket.largestFastBinFrameSize, let pool = framePool ?? makeFramePool(),
           let buffer = rlk_frame_pool_take(pool, byteCount) {
            try initMessage(slot, pooled: buffer, byteCount: byteCount, pool: pool)
            return UnsafeMutableRawBufferPointer(start: buffer, count: byteCount)
        }
        try zmqCall("zmq_msg_init_size") { zmq_msg_init_size(slot, byteCount) }
        return UnsafeMutableRawBufferPointer(start: zmq_msg_data(slot), count: byteCount)
    }

    /// Sends the frame of `byteCount` bytes that `prepareFrame(_:byteCount:)` made ready in
    /// `slot`, as `sendFrame(_:more:dontWait:)` sends: the frames of one message follow
    /// each other with `more` set on all but the last, and only the first may use
    /// `dontWait`. A frame that is not queued is released (its buffer goes back to the pool).
    ///
    /// - Returns: `false` if `dontWait` and the frame cannot be queued now, else `true`.
    /// Inlined, always: called from outside RunLoopZMQ, it was left a call (40 instructions
    /// a message on the stream's sender, against 11 inlined; callgrind).
    @inlinable @inline(__always)
    package func sendFrame(_ slot: UnsafeMutablePointer<FrameSlot>, byteCount: Int, more: Bool,
                           dontWait: Bool) throws(SystemCallError) -> Bool {
        if byteCount <= ZMQSocket.verySmallFrameSize {
            return try sendFrame(UnsafeRawBufferPointer(start: UnsafeRawPointer(slot), count: byteCount),
                                 more: more, dontWait: dontWait)
        }
        return try sendMessage(slot, more: more, dontWait: dontWait)
    }

    /// Sends the frame that `prepareFrame(_:byteCount:)` made ready in `slot`, as
    /// `sendFrame(_:byteCount:more:dontWait:)` does, except that a frame not queued stays
    /// in `slot` as it was, to be sent again: for a frame filled once and sent whenever the
    /// peer takes it. The caller releases the slot with `releaseFrame(_:byteCount:)` in
    /// every case, queued or not (a queued frame leaves an empty message there).
    ///
    /// - Returns: `false` if `dontWait` and the frame cannot be queued now, else `true`.
    @inlinable
    package func sendFrameKeeping(_ slot: UnsafeMutablePointer<FrameSlot>, byteCount: Int, more: Bool,
                                  dontWait: Bool) throws(SystemCallError) -> Bool {
        if byteCount <= ZMQSocket.verySmallFrameSize {
            return try sendFrame(UnsafeRawBufferPointer(start: UnsafeRawPointer(slot), count: byteCount),
                                 more: more, dontWait: dontWait)
        }
        let flags = ZMQSocket.sendFlags(more: more, dontWait: dontWait)
        if !dontWait {
            try zmqCall("zmq_msg_send") { zmq_msg_send(slot, handle, flags) }
            return true
        }
        // A failed zmq_msg_send leaves the message as it was: try it again, once.
        if try zmqNonBlockingCall("zmq_msg_send", { zmq_msg_send(slot, handle, flags) }) != nil {
            return true
        }
        guard try isReady(for: .pollOut) else { return false }
        return try zmqNonBlockingCall("zmq_msg_send", { zmq_msg_send(slot, handle, flags) }) != nil
    }

    /// Releases the frame `prepareFrame(_:byteCount:)` made ready in `slot`, whether
    /// `sendFrameKeeping(_:byteCount:more:dontWait:)` queued it or not: a pool's buffer
    /// goes back to the pool, libzmq's is freed (a very small frame holds nothing).
    @inlinable
    package static func releaseFrame(_ slot: UnsafeMutablePointer<FrameSlot>, byteCount: Int) {
        if byteCount > ZMQSocket.verySmallFrameSize { zmq_msg_close(slot) }
    }

    /// Sends one frame of `byteCount` bytes that `fill` writes in place (exactly
    /// `byteCount` bytes): `prepareFrame(_:byteCount:)`, `fill`, then
    /// `sendFrame(_:byteCount:more:dontWait:)`, for a caller with one way to fill it.
    ///
    /// - Returns: `false` if `dontWait` and the frame cannot be queued now, else `true`.
    @inlinable
    package func sendFrame(byteCount: Int, more: Bool, dontWait: Bool,
                           _ fill: (UnsafeMutableRawBufferPointer) -> Void) throws(SystemCallError) -> Bool {
        try withUnsafeTemporaryAllocation(of: FrameSlot.self, capacity: 1) { slot throws(SystemCallError) in
            let slot = slot.baseAddress.unsafelyUnwrapped
            fill(try prepareFrame(slot, byteCount: byteCount))
            return try sendFrame(slot, byteCount: byteCount, more: more, dontWait: dontWait)
        }
    }

    /// The largest frame sent from libzmq's own allocation rather than the frame pool:
    /// libzmq allocates `40 + byteCount` bytes for it (its control block and the bytes in
    /// one chunk), and up to 80 bytes of payload that chunk (at most 128 bytes with glibc's
    /// header) is one of glibc's fast bins, which neither thread locks the arena for. Above
    /// it the pool's buffer plus libzmq's 40-byte control block is the cheaper pair; below
    /// it, measured with 43-byte frames (a 16-byte component), the pool was about a fifth
    /// slower.
    @inlinable
    package static var largestFastBinFrameSize: Int { 80 }

    /// The largest frame libzmq keeps inside its `zmq_msg_t` rather than in a buffer of its
    /// own: `max_vsm_size` in libzmq's `msg.hpp` (4.3.4), 64 − (a pointer + 3 + 16 + 4),
    /// 33 bytes on 64-bit. `zmq_send` of such a frame allocates nothing.
    @inlinable
    package static var verySmallFrameSize: Int { 64 - (MemoryLayout<UnsafeRawPointer>.size + 3 + 16 + 4) }

    /// `zmq_msg_init_data` of a pool's buffer, which libzmq gives back to the pool when it
    /// closes the message; if it fails, the buffer goes back at once.
    @inlinable @inline(__always)
    func initMessage(_ message: UnsafeMutablePointer<zmq_msg_t>, pooled buffer: UnsafeMutableRawPointer,
                     byteCount: Int, pool: OpaquePointer) throws(SystemCallError) {
        do throws(SystemCallError) {
            try zmqCall("zmq_msg_init_data") {
                zmq_msg_init_data(message, buffer, byteCount, rlk_frame_pool_give_back, UnsafeMutableRawPointer(pool))
            }
        } catch {
            rlk_frame_pool_give_back(buffer, UnsafeMutableRawPointer(pool)) // libzmq did not take it
            throw error
        }
    }

    /// `zmq_msg_send` of an initialized message, as `sendFrame(_:more:dontWait:)` sends; a
    /// message not queued (or failing) is closed, which releases its buffer (a pool's
    /// buffer goes back to the pool).
    @inlinable @inline(__always)
    func sendMessage(_ message: UnsafeMutablePointer<zmq_msg_t>, more: Bool, dontWait: Bool) throws(SystemCallError) -> Bool {
        let flags = ZMQSocket.sendFlags(more: more, dontWait: dontWait)
        do throws(SystemCallError) {
            if !dontWait {
                try zmqCall("zmq_msg_send") { zmq_msg_send(message, handle, flags) }
                return true
            }
            if try zmqNonBlockingCall("zmq_msg_send", { zmq_msg_send(message, handle, flags) }) != nil {
                return true
            }
            // A failed zmq_msg_send leaves the message as it was: try it again, once.
            if try isReady(for: .pollOut),
               try zmqNonBlockingCall("zmq_msg_send", { zmq_msg_send(message, handle, flags) }) != nil {
                return true
            }
        } catch {
            zmq_msg_close(message)
            throw error
        }
        zmq_msg_close(message) // not queued
        return false
    }
}
