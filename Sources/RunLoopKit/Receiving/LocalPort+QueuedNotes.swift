import RunLoopCore
import RunLoopWire

/// Receiving the notes senders queued in their rings (`QueuedNote`, `docs/wire-format.md`,
/// "Shared memory"): each is delivered as the message it stands for, a data component in
/// a frame of its own whose bytes lie in the ring, through the path of a message received
/// over ZeroMQ, with the sender the ring's side-channel connection proved.
extension LocalPort {
    /// A sender may have queued a note (its doorbell rang, or the port gave it one): the
    /// port is ready in its modes if a note may be delivered (`hasPendingMessage()`).
    func queuedNotesMayWait() {
        descriptorSlot.queuesOpen = true
        descriptorSlot.queuedNotesMayWait = true
        guard let loop = ownerLoop, loop.isOwnerThread else { return }
        loop.sentOnPortSource(self)
    }

    /// Delivers one queued note that may be delivered now, and gives its bytes back once
    /// its handler returned; nil if none may. A note naming bytes outside its ring is
    /// dropped and counted (`unknownDescriptors`).
    func deliverQueuedNote() -> PortDelivery? {
        guard let receiver = descriptorSlot.receiver, let (ring, note, sender) = receiver.nextQueuedNote() else {
            descriptorSlot.queuedNotesMayWait = false
            return nil
        }
        guard let bytes = ring.take(note) else {
            drop(.unknownDescriptors, "a queued note names bytes outside its ring")
            return .dropped
        }
        receiver.countSharedComponent(queued: true)
        defer { ring.giveBack(endingAt: note.start &+ note.length) }
        var header = (UInt64(0), UInt64(0), UInt64(0), UInt64(0)) // WireCodec.soleFrameHeaderSize bytes, on the stack
        return withUnsafeMutableBytes(of: &header) { header in
            let frame = WireCodec.writeSoleFrameHeader(into: header, id: note.id, frameLength: bytes.count)
            return withUnsafeTemporaryAllocation(of: UnsafeRawBufferPointer.self, capacity: 2) { frames in
                frames.initializeElement(at: 0, to: frame)
                frames.initializeElement(at: 1, to: bytes)
                return deliverQueued(UnsafeBufferPointer(frames), sender: sender)
            }
        }
    }

    /// The port is drained (as far as ZeroMQ goes): asks every sender with a doorbell to
    /// ring it at its next queued note; true (and the port looks at its queues) if a note
    /// may be delivered now.
    func armQueues() -> Bool {
        guard descriptorSlot.receiver?.armQueues() == true else { return false }
        descriptorSlot.queuedNotesMayWait = true
        return true
    }

    private func deliverQueued(_ frames: UnsafeBufferPointer<UnsafeRawBufferPointer>, sender: MessageSenderBox) -> PortDelivery {
        do throws(WireFormatError) {
            if let borrowingHandler {
                let checked = try PortEnvelope.check(frames, limits: .default, replyAddresses: &replyAddresses)
                statistics.countReceived()
                _ = handle(LoopMessageView(checked, sender: sender.sender), correlationID: 0,
                           routingID: UnsafeRawBufferPointer(start: nil, count: 0), hasDelimiter: false, by: borrowingHandler)
            } else {
                deliver(try PortEnvelope.decode(frames: frames, limits: .default, replyAddresses: &replyAddresses,
                                                sender: sender, storage: &storage))
            }
            return .delivered
        } catch {
            drop(PortEnvelope.dropReason(rejecting: error), "\(error)")
            return .dropped
        }
    }
}
