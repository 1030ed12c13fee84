import Glibc
import RunLoopCore
import RunLoopSystem

/// A port source for the core's tests, where a `LocalPort` would only be "some port": a
/// count of waiting messages in place of the socket's queue and an eventfd in place of
/// `ZMQ_FD`, behaving as `PortBasedSource` says the loop may rely on and no better.
///
/// - `send()` (any thread) queues a message and signals the descriptor, as a message
///   reaching libzmq's mailbox does.
/// - Asking (`hasPendingMessage()`) and receiving (`handleOneMessage()`) both take the
///   descriptor's signal, as libzmq processing its mailbox does, whatever still waits: the
///   descriptor stays quiet while messages are queued, so a loop that trusts it alone
///   strands them.
/// - `handleOneMessage()` delivers one message to `handler` (its number: messages are
///   numbered from 0 in the order sent), or answers `.empty` once none waits.
///
/// Added with `loop.addItem(.port(port), binding: nil, to: mode)` on the loop's thread, and
/// taken out with `removeItem`/`removeEverywhere`. Loop thread only, but `send()`.
package final class FakePort: PortBasedSource, @unchecked Sendable {
    package let pollDescriptor: Int32
    /// Messages queued and not yet received; any thread.
    private let queued: LockedValue<Int>
    private var isClosed = false
    /// Called on the loop's thread for each message delivered, with its number.
    package var handler: (Int) -> Void
    package var canAskInsteadOfDraining = true
    /// Messages delivered to `handler`.
    package private(set) var delivered = 0
    /// How many times the socket was asked (`ZMQ_EVENTS` for a real port).
    package private(set) var asked = 0
    package private(set) var detachments = 0

    /// A port with `waiting` messages already queued, its descriptor not signalled for them.
    package convenience init(waiting: Int = 0, handler: @escaping (Int) -> Void = { _ in }) throws {
        self.init(descriptor: try Kernel.eventDescriptor(), waiting: waiting)
        self.handler = handler
    }

    /// A port whose descriptor takes the number `number` (closed before, its number free),
    /// as a new socket's `ZMQ_FD` may take a closed one's.
    package convenience init(reusing number: Int32, waiting: Int = 0) throws {
        let fd = try Kernel.eventDescriptor()
        if fd != number { // the lowest free number may be a lower one
            defer { Kernel.close(fd) }
            guard dup2(fd, number) == number else { throw SystemCallError(call: "dup2", errno: errno) }
        }
        self.init(descriptor: number, waiting: waiting)
    }

    private init(descriptor: Int32, waiting: Int) {
        pollDescriptor = descriptor
        _ = fcntl(pollDescriptor, F_SETFL, fcntl(pollDescriptor, F_GETFL) | O_NONBLOCK) // as `ZMQ_FD` is read: never blocking
        queued = LockedValue(waiting)
        handler = { _ in }
    }

    deinit { closeDescriptor() }

    /// Closes the descriptor now, as a port's socket closes (its number may then be reused).
    package func closeDescriptor() {
        guard !isClosed else { return }
        isClosed = true
        Kernel.close(pollDescriptor)
    }

    /// Messages queued and not yet received. Setting it queues or takes messages without
    /// signalling the descriptor (messages libzmq holds while `ZMQ_FD` is quiet).
    package var waiting: Int {
        get { queued.withLock { $0 } }
        set { queued.withLock { $0 = newValue } }
    }

    /// Signals the descriptor without queuing a message, as libzmq does for the socket's
    /// own commands. Any thread.
    package func signal() {
        var one: UInt64 = 1
        do { _ = try withUnsafeBytes(of: &one) { try Kernel.write(pollDescriptor, $0) } } catch {
            preconditionFailure("the fake port's eventfd refused a write: \(error)")
        }
    }

    /// Queues `count` messages and signals the descriptor. Any thread.
    package func send(_ count: Int = 1) {
        queued.withLock { $0 += count }
        signal()
    }

    /// Takes the descriptor's signal, as libzmq does whenever it processes the mailbox.
    private func processMailbox() {
        var signal: UInt64 = 0
        _ = try? withUnsafeMutableBytes(of: &signal) { try Kernel.read(pollDescriptor, into: $0) } // EAGAIN: not signalled
    }

    package func hasPendingMessage() -> Bool {
        asked += 1
        processMailbox()
        return waiting > 0
    }

    package func handleOneMessage() -> PortDelivery {
        processMailbox()
        let took = queued.withLock { count -> Bool in
            guard count > 0 else { return false }
            count -= 1
            return true
        }
        guard took else { return .empty }
        delivered += 1
        handler(delivered - 1)
        return .delivered
    }

    package func detachedFromLoop() { detachments += 1 }
}
