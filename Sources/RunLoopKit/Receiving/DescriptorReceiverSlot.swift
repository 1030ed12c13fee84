/// Where a port keeps its `DescriptorReceiver` once it is named (`LocalPort.descriptorSlot`).
///
/// Thread safety: none; the port's owner thread's.
final class DescriptorReceiverSlot {
    var receiver: DescriptorReceiver? { didSet { receiver?.slot = self } }
    /// Whether a sender may queue notes in a ring the port mapped (`QueuedNote`): set once
    /// the port gave a doorbell; then the port arms the rings whenever it is drained.
    var queuesOpen = false
    /// Whether a queued note may be deliverable now: a doorbell rang, a note or a fence
    /// came over ZeroMQ, or a queued note was delivered. The port then looks at the queues
    /// before its next receive, and clears it when it found none.
    var queuedNotesMayWait = false
}
