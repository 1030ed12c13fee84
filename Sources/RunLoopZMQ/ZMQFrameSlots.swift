import CZeroMQ

/// The `zmq_msg_t`s one socket receives a multipart message into, one per frame, kept
/// from one receive to the next: once they have grown to the longest message seen,
/// receiving allocates nothing of its own, and the frames are read where libzmq put them.
///
/// Every slot is always an initialized message (`zmq_msg_init`): `zmq_msg_recv` releases
/// what a slot held before it fills it, and `release(_:)` gives back each large frame's
/// buffer as soon as the receiver is done with it; a few small frames stay until the next
/// receive into their slots or the slots' end (at most `keptSlots` × `keptFrameBytes`
/// bytes a socket). Thread safety: none; owned by one `ZMQSocket`.
package final class ZMQFrameSlots {
    // One socket's, changed only in `grow` and `lend`; see architecture.md, exclusivity checks.
    @exclusivity(unchecked) private var slots: UnsafeMutablePointer<zmq_msg_t>
    /// Where `lend(_:)` puts each frame's bytes, one view per slot.
    @exclusivity(unchecked) private var views: UnsafeMutablePointer<UnsafeRawBufferPointer>
    /// Each slot's frame size, as the receive that filled it returned it (`noteSize`).
    @exclusivity(unchecked) private var sizes: UnsafeMutablePointer<Int>
    @exclusivity(unchecked) private var capacity: Int

    package init(capacity: Int = 4) {
        precondition(capacity > 0)
        slots = .allocate(capacity: capacity)
        views = .allocate(capacity: capacity)
        sizes = .allocate(capacity: capacity)
        self.capacity = capacity
        for index in 0..<capacity { zmq_msg_init(slots + index) }
    }

    deinit {
        for index in 0..<capacity { zmq_msg_close(slots + index) }
        slots.deallocate()
        views.deallocate()
        sizes.deallocate()
    }

    /// The slot for frame `index`, growing the slots if needed. Growing moves the frames
    /// already received with `zmq_msg_move` (a `zmq_msg_t` must not be copied bytewise).
    package func slot(_ index: Int) -> UnsafeMutablePointer<zmq_msg_t> {
        if index >= capacity { grow(to: max(index + 1, capacity * 2)) }
        return slots + index
    }

    /// Notes the size of the frame just received into slot `index`: what `zmq_msg_recv`
    /// returned, which spares `lend` asking `zmq_msg_size` (a call into libzmq per frame).
    /// libzmq caps the count it returns at `INT_MAX`; a frame that large is asked.
    @inline(__always)
    package func noteSize(_ received: Int32, of index: Int) {
        sizes[index] = received == Int32.max ? zmq_msg_size(slots + index) : Int(received)
    }

    /// The bytes of the first `count` frames, where libzmq put them: valid until
    /// `release(count)` or the next receive into these slots. Each slot's size was noted
    /// when its frame was received (`noteSize`).
    package func lend(_ count: Int) -> UnsafeBufferPointer<UnsafeRawBufferPointer> {
        for index in 0..<count {
            (views + index).initialize(to: UnsafeRawBufferPointer(start: zmq_msg_data(slots + index),
                                                                  count: sizes[index]))
        }
        return UnsafeBufferPointer(start: views, count: count)
    }

    /// Gives back the buffers of the first `count` frames that are worth giving back now
    /// (`zmq_msg_close`) and makes their slots empty messages again, so that a large frame,
    /// or a long message's frames, are not kept until the next receive. The first
    /// `keptSlots` frames of at most `keptFrameBytes` each (a routing id, a delimiter, a
    /// small message frame) stay until the next receive into their slot closes them
    /// (`zmq_msg_recv` does) or the slots go: closing and re-initializing them here would
    /// be two more calls into libzmq per frame for nothing.
    package func release(_ count: Int) {
        var index = 0
        let count = min(count, capacity)
        while index < count {
            if index >= ZMQFrameSlots.keptSlots || sizes[index] > ZMQFrameSlots.keptFrameBytes {
                zmq_msg_close(slots + index)
                zmq_msg_init(slots + index)
            }
            index += 1
        }
    }

    /// How many of the first slots `release(_:)` may leave holding a small frame.
    static let keptSlots = 4
    /// The largest frame `release(_:)` leaves in its slot.
    static let keptFrameBytes = 1024

    private func grow(to newCapacity: Int) {
        let grown = UnsafeMutablePointer<zmq_msg_t>.allocate(capacity: newCapacity)
        for index in 0..<newCapacity { zmq_msg_init(grown + index) }
        for index in 0..<capacity {
            zmq_msg_move(grown + index, slots + index)
            zmq_msg_close(slots + index)
        }
        slots.deallocate()
        slots = grown
        views.deallocate()
        views = .allocate(capacity: newCapacity)
        let grownSizes = UnsafeMutablePointer<Int>.allocate(capacity: newCapacity)
        grownSizes.update(from: sizes, count: capacity)
        sizes.deallocate()
        sizes = grownSizes
        capacity = newCapacity
    }
}
