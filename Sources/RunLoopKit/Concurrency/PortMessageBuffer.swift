import RunLoopSystem

/// A message (or request) stream's buffer, between the port's handler (on the port's owner thread) and
/// the consumer (any thread): the messages not yet taken, the waiting consumer, and whether
/// the port is paused out of its modes, as one `State`. See `PortStream` for the policy.
///
/// Thread safety: every member from any thread; `deliver` from the port's handler only.
final class PortMessageBuffer<Element: Sendable>: @unchecked Sendable {
    typealias Consumer = CheckedContinuation<Element?, Never>

    let policy: PortStreamBufferingPolicy
    /// The owner-thread side; set once, before the buffer is shared.
    var attachment: PortStreamAttachment<Element>?

    private let lock = Lock()
    /// The buffered messages, the waiting consumer and the port's pause. Checked rather
    /// than unsafe continuations here and in the async calls: with unsafe ones,
    /// ThreadSanitizer reports a race between a resume on a loop's thread and the resumed
    /// task when the resume beats the task's suspension (a hand-off inside the
    /// uninstrumented runtime); the checked one's is visible to it.
    private var state = State<Consumer>.open(MessageQueue<Element>(), iterated: false, .flowing) // protected by lock
    /// For tests: how many times the port was paused, and the most messages buffered at once.
    private(set) var pauseCount = 0 // protected by lock
    private(set) var mostBuffered = 0 // protected by lock

    init(policy: PortStreamBufferingPolicy) { self.policy = policy }

    var statistics: (pauses: Int, mostBuffered: Int) { lock.withLock { (pauseCount, mostBuffered) } }

    // MARK: - Port side (owner thread)

    /// Takes a message from the port's handler.
    func accept(_ message: Element) -> State<Consumer>.Acceptance {
        lock.withLock {
            let acceptance = state.accept(message, capacity: policy.capacity)
            switch acceptance {
            case .buffered: mostBuffered = max(mostBuffered, state.bufferedCount)
            case .bufferedAndFull:
                mostBuffered = max(mostBuffered, state.bufferedCount)
                pauseCount += 1
            case .handedOver, .refused: break
            }
            return acceptance
        }
    }

    /// The port is back in its modes.
    func resumed() {
        lock.withLock { state.resumed() }
    }

    /// The stream's handler was released: the port was invalidated or got another handler.
    func portFinished() {
        let consumer = lock.withLock { state.portFinished() }
        consumer?.resume(returning: nil)
        attachment?.portFinished()
    }

    // MARK: - Consumer side (any thread)

    /// Marks the stream iterated; false if it was already (a second iterator ends at once).
    func beginIteration() -> Bool {
        lock.withLock { state.beginIteration() }
    }

    /// The next message, waiting for one; nil once the stream ended. The task suspends on
    /// the caller's actor: no hop off it and back for each wait.
    func next(isolation: isolated (any Actor)? = #isolation) async -> Element? {
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
    private func take(orWait continuation: Consumer?) -> Take {
        let (taken, resume) = lock.withLock {
            state.take(orWait: continuation, resumeThreshold: policy.resumeThreshold)
        }
        if resume { attachment?.requestResume() }
        return taken
    }

    /// The consumer stopped: ends the stream, discards what is buffered, and detaches the
    /// stream from the port (its handler removed, the port back in its modes).
    func consumerStopped() {
        let (consumer, detach) = lock.withLock { state.consumerStopped() }
        consumer?.resume(returning: nil)
        if detach { attachment?.requestDetach() }
    }

    /// The stream value was released: ends the stream unless an iterator took it over.
    func streamReleased() {
        if !lock.withLock({ state.isIterated }) { consumerStopped() }
    }
}

extension PortMessageBuffer {
    /// Whether the port is out of its modes because the buffer filled.
    enum Pause: Equatable {
        /// The port is in its modes.
        case flowing
        /// The buffer filled: the port is out of its modes.
        case paused
        /// The consumer caught up: the port's return is asked for, not yet done.
        case resumeRequested
    }

    /// What the consumer finds.
    enum Take {
        case message(Element)
        case end
        case wait
    }

    /// A message stream's state, with what is valid in it: the buffered messages while
    /// there may be some, the consumer only while it waits (so nothing is buffered), the
    /// pause while the port may be paused, nothing once the consumer stopped. Its
    /// transitions are pure (generic over the waiter, so that they are tested without a
    /// task: `PortMessageBufferStateTests`); the buffer applies them under its lock and
    /// resumes the consumer, pauses, resumes or detaches the port outside it.
    enum State<Waiter> {
        /// Messages flow from the port; nothing is buffered and the consumer waits.
        case waiting(Waiter, Pause)
        /// Messages flow from the port; the consumer, if any, is not waiting.
        case open(MessageQueue<Element>, iterated: Bool, Pause)
        /// The port is gone or its handler was replaced: the consumer gets what is buffered, then nil.
        case portFinished(MessageQueue<Element>, iterated: Bool, Pause)
        /// The consumer stopped: nothing is kept.
        case consumerStopped

        /// What the handler does with a message after `accept`.
        enum Acceptance {
            case handedOver(Waiter)
            case buffered
            /// Buffered, and the buffer is now full: pause the port.
            case bufferedAndFull
            /// The consumer is gone: drop the message as for a port without a handler.
            case refused
        }

        /// A message from the port: handed to the waiting consumer, or buffered (pausing
        /// the port once `capacity` are), or refused once the port or the consumer is done.
        mutating func accept(_ message: Element, capacity: Int) -> Acceptance {
            switch self {
            case .waiting(let waiter, let pause):
                self = .open(MessageQueue<Element>(), iterated: true, pause)
                return .handedOver(waiter)
            case .open(var messages, let iterated, var pause):
                self = .consumerStopped // the queue is uniquely held while it grows
                messages.append(message)
                let full = messages.count >= capacity && pause == .flowing
                if full { pause = .paused }
                self = .open(messages, iterated: iterated, pause)
                return full ? .bufferedAndFull : .buffered
            case .portFinished, .consumerStopped:
                return .refused
            }
        }

        /// The port is back in its modes.
        mutating func resumed() {
            switch self {
            case .waiting(let waiter, _): self = .waiting(waiter, .flowing)
            case .open(let messages, let iterated, _): self = .open(messages, iterated: iterated, .flowing)
            case .portFinished(let messages, let iterated, _):
                self = .portFinished(messages, iterated: iterated, .flowing)
            case .consumerStopped: break
            }
        }

        /// The port is gone: the waiting consumer to resume with nil (nothing is buffered then).
        mutating func portFinished() -> Waiter? {
            switch self {
            case .waiting(let waiter, let pause):
                self = .portFinished(MessageQueue<Element>(), iterated: true, pause)
                return waiter
            case .open(let messages, let iterated, let pause):
                self = .portFinished(messages, iterated: iterated, pause)
                return nil
            case .portFinished, .consumerStopped:
                return nil
            }
        }

        /// An iterator takes the stream: true for the first one only.
        mutating func beginIteration() -> Bool {
            switch self {
            case .open(let messages, false, let pause):
                self = .open(messages, iterated: true, pause)
                return true
            case .portFinished(let messages, false, let pause):
                self = .portFinished(messages, iterated: true, pause)
                return true
            case .waiting, .open, .portFinished, .consumerStopped:
                return false
            }
        }

        /// The consumer takes a buffered message, finds the end, or waits (as `waiter`, if
        /// given); and whether to ask for the paused port's return, once, when at most
        /// `resumeThreshold` messages are left.
        mutating func take(orWait waiter: Waiter?, resumeThreshold: Int) -> (Take, requestResume: Bool) {
            switch self {
            case .waiting:
                precondition(waiter == nil, "a PortMessageStream was iterated by two tasks at once")
                return (.wait, false)
            case .open(var messages, let iterated, var pause):
                self = .consumerStopped // the queue is uniquely held while it drains
                guard let message = messages.popFirst() else {
                    self = waiter.map { .waiting($0, pause) } ?? .open(messages, iterated: iterated, pause)
                    return (.wait, false)
                }
                let resume = pause.resumes(leaving: messages.count, threshold: resumeThreshold)
                self = .open(messages, iterated: iterated, pause)
                return (.message(message), resume)
            case .portFinished(var messages, let iterated, var pause):
                self = .consumerStopped
                let message = messages.popFirst()
                let resume = message != nil && pause.resumes(leaving: messages.count, threshold: resumeThreshold)
                self = .portFinished(messages, iterated: iterated, pause)
                return (message.map { .message($0) } ?? .end, resume)
            case .consumerStopped:
                return (.end, false)
            }
        }

        /// The consumer stopped: drops what is buffered; the waiting consumer to resume with
        /// nil, and whether to detach the stream from the port (if the port was still there).
        mutating func consumerStopped() -> (Waiter?, detach: Bool) {
            defer { self = .consumerStopped }
            switch self {
            case .waiting(let waiter, _): return (waiter, true)
            case .open: return (nil, true)
            case .portFinished, .consumerStopped: return (nil, false)
            }
        }

        /// Whether an iterator took the stream (a stopped consumer counts as one: nothing
        /// is left to end).
        var isIterated: Bool {
            switch self {
            case .waiting, .consumerStopped: true
            case .open(_, let iterated, _), .portFinished(_, let iterated, _): iterated
            }
        }

        /// How many messages are buffered.
        var bufferedCount: Int {
            switch self {
            case .open(let messages, _, _), .portFinished(let messages, _, _): messages.count
            case .waiting, .consumerStopped: 0
            }
        }
    }
}

extension PortMessageBuffer.Pause {
    /// After a message was taken, leaving `count`: whether to ask for the paused port's
    /// return (once: the pause becomes `resumeRequested`).
    mutating func resumes(leaving count: Int, threshold: Int) -> Bool {
        guard self == .paused, count <= threshold else { return false }
        self = .resumeRequested
        return true
    }
}

/// A FIFO of messages: an array read from a moving head, compacted as it drains.
struct MessageQueue<Element> {
    private var storage: [Element] = []
    private var head = 0

    var count: Int { storage.count - head }

    mutating func append(_ message: Element) { storage.append(message) }

    mutating func popFirst() -> Element? {
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
