import RunLoopSystem

/// A message stream's buffer, between the port's handler (on the port's owner thread) and
/// the consumer (any thread): the messages not yet taken, the waiting consumer, and whether
/// the port is paused out of its modes. See `PortMessageStream` for the policy.
///
/// Thread safety: every member from any thread; `deliver` from the port's handler only.
final class PortMessageBuffer: @unchecked Sendable {
    enum Phase {
        /// Messages flow from the port to the consumer.
        case open
        /// The port is gone or its handler was replaced: the consumer gets what is buffered, then nil.
        case portFinished
        /// The consumer stopped: nothing is kept.
        case consumerStopped
    }

    /// What the handler does with a message after `accept`.
    enum Acceptance {
        case handedOver(CheckedContinuation<LoopMessage?, Never>)
        case buffered
        /// Buffered, and the buffer is now full: pause the port.
        case bufferedAndFull
        /// The consumer is gone: drop the message as for a port without a handler.
        case refused
    }

    let policy: PortMessageStream.BufferingPolicy
    /// The owner-thread side; set once, before the buffer is shared.
    var attachment: PortStreamAttachment?

    private let lock = Lock()
    private var phase = Phase.open // protected by lock
    private var messages = MessageQueue() // protected by lock
    /// The consumer waiting for a message. Checked rather than unsafe continuations here and
    /// in the async calls: with unsafe ones, ThreadSanitizer reports a race between a resume
    /// on a loop's thread and the resumed task when the resume beats the task's suspension
    /// (a hand-off inside the uninstrumented runtime); the checked one's is visible to it.
    private var waiter: CheckedContinuation<LoopMessage?, Never>? // protected by lock
    /// The port is out of its modes (the buffer filled), and whether its return is asked for.
    private var paused = false // protected by lock
    private var resumeRequested = false // protected by lock
    private var iterated = false // protected by lock
    /// For tests: how many times the port was paused, and the most messages buffered at once.
    private(set) var pauseCount = 0 // protected by lock
    private(set) var mostBuffered = 0 // protected by lock

    init(policy: PortMessageStream.BufferingPolicy) { self.policy = policy }

    var statistics: (pauses: Int, mostBuffered: Int) { lock.withLock { (pauseCount, mostBuffered) } }

    // MARK: - Port side (owner thread)

    /// Takes a message from the port's handler.
    func accept(_ message: LoopMessage) -> Acceptance {
        lock.withLock {
            guard phase == .open else { return .refused }
            if let waiter {
                self.waiter = nil
                return .handedOver(waiter)
            }
            messages.append(message)
            mostBuffered = max(mostBuffered, messages.count)
            guard messages.count >= policy.capacity, !paused else { return .buffered }
            paused = true
            pauseCount += 1
            return .bufferedAndFull
        }
    }

    /// The port is back in its modes.
    func resumed() {
        lock.withLock {
            paused = false
            resumeRequested = false
        }
    }

    /// The stream's handler was released: the port was invalidated or got another handler.
    func portFinished() {
        let consumer = lock.withLock { () -> CheckedContinuation<LoopMessage?, Never>? in
            guard phase == .open else { return nil }
            phase = .portFinished
            defer { waiter = nil }
            return waiter // waiting means nothing is buffered
        }
        consumer?.resume(returning: nil)
        attachment?.portFinished()
    }

    // MARK: - Consumer side (any thread)

    /// Marks the stream iterated; false if it was already (a second iterator ends at once).
    func beginIteration() -> Bool {
        lock.withLock {
            defer { iterated = true }
            return !iterated
        }
    }

    /// What the consumer finds.
    private enum Take {
        case message(LoopMessage)
        case end
        case wait
    }

    /// The next message, waiting for one; nil once the stream ended. The task suspends on
    /// the caller's actor: no hop off it and back for each wait.
    func next(isolation: isolated (any Actor)? = #isolation) async -> LoopMessage? {
        switch take(orWait: nil) {
        case .message(let message): return message
        case .end: return nil
        case .wait: break
        }
        return await withTaskCancellationHandler {
            _ = isolation // captured, so that this closure runs on the caller's actor (see PerformAwaiter)
            return await withCheckedContinuation { continuation in
                switch take(orWait: continuation) {
                case .message(let message): continuation.resume(returning: message)
                case .end: continuation.resume(returning: nil)
                case .wait: break // the handler, the port's end or a cancellation resumes it
                }
            }
        } onCancel: {
            consumerStopped()
        }
    }

    /// A buffered message, the stream's end, or (keeping `continuation`, if given) a wait.
    private func take(orWait continuation: CheckedContinuation<LoopMessage?, Never>?) -> Take {
        let (taken, resume) = lock.withLock { () -> (Take, Bool) in
            if let message = messages.popFirst() { return (.message(message), shouldResume()) }
            guard phase == .open else { return (.end, false) }
            if let continuation {
                precondition(waiter == nil, "a PortMessageStream was iterated by two tasks at once")
                waiter = continuation
            }
            return (.wait, false)
        }
        if resume { attachment?.requestResume() }
        return taken
    }

    /// After a message was taken: whether to ask for the paused port's return. Under the lock.
    private func shouldResume() -> Bool {
        guard paused, !resumeRequested, messages.count <= policy.resumeThreshold else { return false }
        resumeRequested = true
        return true
    }

    /// The consumer stopped: ends the stream, discards what is buffered, and detaches the
    /// stream from the port (its handler removed, the port back in its modes).
    func consumerStopped() {
        let (consumer, wasOpen) = lock.withLock { () -> (CheckedContinuation<LoopMessage?, Never>?, Bool) in
            let wasOpen = phase == .open
            phase = .consumerStopped
            messages.removeAll()
            defer { waiter = nil }
            return (waiter, wasOpen)
        }
        consumer?.resume(returning: nil)
        if wasOpen { attachment?.requestDetach() }
    }

    /// The stream value was released: ends the stream unless an iterator took it over.
    func streamReleased() {
        if !lock.withLock({ iterated }) { consumerStopped() }
    }
}

/// A FIFO of messages: an array read from a moving head, compacted as it drains.
struct MessageQueue {
    private var storage: [LoopMessage] = []
    private var head = 0

    var count: Int { storage.count - head }

    mutating func append(_ message: LoopMessage) { storage.append(message) }

    mutating func popFirst() -> LoopMessage? {
        guard head < storage.count else { return nil }
        let message = storage[head]
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return message
    }

    mutating func removeAll() {
        storage.removeAll()
        head = 0
    }
}
