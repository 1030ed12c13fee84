import RunLoopSystem
import CLinuxPoll
import Glibc
import Synchronization

/// A run-loop source for any file descriptor (`CFFileDescriptor`'s and `CFSocket`'s role on
/// Linux): a socket, a pipe, an inotify or timerfd descriptor, a device.
///
/// It watches its descriptor for `readable` and/or `writable`, level-triggered (as
/// `poll(2)` does): while the descriptor stays ready and the source is enabled, every pass
/// of its loop in one of its modes calls the handler again, so the handler reads or writes
/// what it can and returns. The handler runs on the loop's thread, says what is ready, and
/// counts as a handled source (`run(mode:before:)` returns after it). A hang-up or error
/// condition is always reported (the kernel reports them unasked), together with what was
/// asked for, since a read or write then returns at once; a handler that sees `hangUp`
/// usually invalidates the source (level-triggered, it would be called again every pass).
///
/// Like every source it lives in modes: the descriptor is watched only while its loop runs
/// in one of them. **Enabling and disabling** (`setInterest(_:)`, `enable()`, `disable()`)
/// changes what is watched without taking the source out of its modes: one operation,
/// applied once before the loop's next sleep (the descriptor leaves the poll set while
/// disabled, so a hung-up pipe cannot wake it).
///
/// Ownership: with `.borrowed` (the default) RunLoopKit never closes the descriptor; with
/// `.owned` it closes it when the source is invalidated (or its loop torn down, or the
/// source released) — after taking it out of the poll set, on the loop's thread.
///
/// A descriptor closed behind the source's back cannot crash or spin the loop: the kernel
/// drops a closed descriptor from the poll set by itself, so the loop simply stops hearing
/// of it; and the next time the loop changes what it watches for the source (an enable or
/// disable, or a run in a mode the source is not in and back), the kernel's refusal
/// (`EBADF`, `ENOENT`) is delivered to the handler as `.lost(error)`, once, and the source
/// is invalidated (an owned descriptor is then not closed: its number may already be
/// someone else's). A descriptor that cannot be polled (a regular file: `EPERM`), or that
/// another source of the same loop already watches (`EEXIST`), is reported the same way
/// when the source is first added. Each such loss is also logged at `.debug`
/// ("runloopkit.loop").
///
/// A source belongs to one run loop, in any number of its modes.
///
/// Thread safety: `setInterest(_:)`, `enable()`, `disable()`, `interest`, `isEnabled`,
/// `invalidate()` and `isValid` from any thread; the handler runs on the loop's thread.
public final class DescriptorSource: @unchecked Sendable {
    /// What a descriptor is watched for, and what is ready.
    public struct Events: OptionSet, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        /// Data can be read (or a peer hung up: a read then returns 0).
        public static let readable = Events(rawValue: 1 << 0)
        /// Data can be written without blocking.
        public static let writable = Events(rawValue: 1 << 1)
        /// Reported only: the peer hung up (`EPOLLHUP`, `EPOLLRDHUP`).
        public static let hangUp = Events(rawValue: 1 << 2)
        /// Reported only: an error is pending on the descriptor (`EPOLLERR`).
        public static let error = Events(rawValue: 1 << 3)

        public var description: String {
            let names = [(Events.readable, "readable"), (.writable, "writable"), (.hangUp, "hangUp"), (.error, "error")]
            return "[" + names.filter { contains($0.0) }.map(\.1).joined(separator: ", ") + "]"
        }

        /// The epoll bits to ask for: readable and writable only (the others come unasked).
        var epollInterest: UInt32 {
            (contains(.readable) ? EPOLLIN.rawValue | EPOLLRDHUP.rawValue : 0) | (contains(.writable) ? EPOLLOUT.rawValue : 0)
        }

        init(epoll bits: UInt32) {
            var events: Events = []
            if bits & EPOLLIN.rawValue != 0 { events.insert(.readable) }
            if bits & EPOLLOUT.rawValue != 0 { events.insert(.writable) }
            if bits & (EPOLLHUP.rawValue | EPOLLRDHUP.rawValue) != 0 { events.insert(.hangUp) }
            if bits & EPOLLERR.rawValue != 0 { events.insert(.error) }
            self = events
        }
    }

    /// What the handler is told.
    public enum Event: Sendable, Equatable {
        /// The descriptor is ready for these (never empty; only what was asked for, plus
        /// `hangUp` and `error`).
        case ready(Events)
        /// The loop can no longer watch the descriptor (closed behind the source's back,
        /// not pollable, or already watched by another source of the loop). The source is
        /// invalid from then on; the handler is not called again.
        case lost(SystemCallError)
    }

    /// Whether RunLoopKit closes the descriptor.
    public enum Ownership: Sendable, Equatable {
        /// Never closed by RunLoopKit.
        case borrowed
        /// Closed when the source is invalidated, its loop torn down, or it is released.
        case owned
    }

    public typealias Handler = (Event) -> Void

    public let descriptor: Int32
    public let ownership: Ownership

    /// The interest and whether it is enabled, in one atomic word so that `setInterest`,
    /// `enable` and `disable` are each one change: bits 0-1 the `Events` asked for, bit 7
    /// set while disabled.
    private let interestWord: Atomic<UInt8>
    private static let disabledBit: UInt8 = 1 << 7

    private enum Lifecycle {
        case valid
        /// Invalidated; the descriptor is closed (if owned) once out of the poll set.
        case invalidated
    }
    private let lifecycleLock = Lock()
    private var lifecycle = Lifecycle.valid // protected by lifecycleLock
    /// Whether an owned descriptor was closed (or must never be: it was lost). Protected by lifecycleLock.
    private var descriptorReleased = false
    /// Whether the source is in its loop's poll-set table, so closing must wait for the
    /// loop's thread to take it out. Protected by lifecycleLock.
    private var inLoopTable = false

    /// Loop thread only; released on invalidation.
    private var handler: Handler?
    /// The signal or child-process source built on this one, if any. Weak, so that one that
    /// was never added to a loop goes (and stops watching) when its owner drops it; kept
    /// strongly (`keptWrapper`) from its first add until it is invalidated, as a loop keeps
    /// what it holds. Set once, right after init.
    package weak var wrapper: AnyObject?
    private var keptWrapper: AnyObject? // loop thread only
    /// The loop it is scheduled on (its validity is `lifecycle`'s: it also closes the descriptor).
    let binding = LoopItemLifetime()

    /// Watches `descriptor` for `interest` (`.readable`, `.writable` or both; empty makes it
    /// start disabled). With `ownership: .owned` RunLoopKit closes the descriptor when done.
    public init(descriptor: Int32, watching interest: Events, ownership: Ownership = .borrowed,
                handler: @escaping Handler) {
        self.descriptor = descriptor
        self.ownership = ownership
        self.handler = handler
        interestWord = Atomic(interest.intersection([.readable, .writable]).rawValue)
    }

    deinit {
        if ownership == .owned && !descriptorReleased { Kernel.close(descriptor) }
    }

    public var isValid: Bool { lifecycleLock.withLock { lifecycle == .valid } }

    /// What the source watches for when enabled. Any thread.
    public var interest: Events {
        Events(rawValue: interestWord.load(ordering: .acquiring) & ~DescriptorSource.disabledBit)
    }

    /// Whether the source is enabled and asks for something. Any thread.
    public var isEnabled: Bool {
        let word = interestWord.load(ordering: .acquiring)
        return word & DescriptorSource.disabledBit == 0 && word != 0
    }

    /// Sets what the source watches for and enables it (empty: watches nothing, as if
    /// disabled), in its modes, applied before its loop's next sleep. Any thread.
    public func setInterest(_ interest: Events) {
        changeInterest(to: interest.intersection([.readable, .writable]).rawValue)
    }

    /// Watches the descriptor again for `interest`, applied before the loop's next sleep. Any thread.
    public func enable() {
        changeInterest(to: interestWord.load(ordering: .acquiring) & ~DescriptorSource.disabledBit)
    }

    /// Stops watching the descriptor without leaving the source's modes: its handler is not
    /// called until `enable()` (the descriptor leaves the poll set before the loop's next
    /// sleep; events the loop had already seen are dropped). Any thread.
    public func disable() {
        changeInterest(to: interestWord.load(ordering: .acquiring) | DescriptorSource.disabledBit)
    }

    /// Removes the source from every mode of its loop and releases its handler; an owned
    /// descriptor is closed once out of the loop's poll set (at once when called on the
    /// loop's thread or when the source is on no loop, else at the loop's next pass). Any thread.
    public func invalidate() {
        let (wasValid, closeNow) = lifecycleLock.withLock { () -> (Bool, Bool) in
            guard lifecycle == .valid else { return (false, false) }
            lifecycle = .invalidated
            return (true, !inLoopTable)
        }
        guard wasValid else { return }
        if closeNow { releaseDescriptor() }
        guard let loop = binding.loop else {
            handler = nil // on no loop, so no loop thread touches it: what it holds goes now
            return
        }
        let accepted = loop.runOnOwnerThread({ $0.removeDescriptorSourceEverywhere(self) })
        if !accepted { releaseDescriptor() } // the loop was torn down: its table is gone
    }

    private func changeInterest(to word: UInt8) {
        interestWord.store(word, ordering: .releasing)
        guard isValid, let loop = binding.loop else { return }
        loop.runOnOwnerThread({ $0.descriptorSourceChanged(self) })
    }

    // MARK: - The loop's side (loop thread)

    /// The epoll bits the source asks for now (0 when disabled or invalid).
    var wantedEpollEvents: UInt32 {
        guard isEnabled, isValid else { return 0 }
        return interest.epollInterest
    }

    /// Calls the handler with what is ready of what it asks for; returns whether it did.
    func fire(readyEpollEvents bits: UInt32) -> Bool {
        guard isEnabled, isValid, let handler else { return false }
        var ready = Events(epoll: bits)
        // A hang-up or error makes the descriptor ready for what it asks (a read returns 0 or
        // the error), as libuv reports it, so a handler that reads hears the end.
        if !ready.isDisjoint(with: [.hangUp, .error]) { ready.formUnion(interest) }
        ready.formIntersection(interest.union([.hangUp, .error]))
        guard !ready.isEmpty else { return false }
        handler(.ready(ready))
        return true
    }

    /// The loop could not watch the descriptor: tells the handler once, then the source is
    /// invalid. `descriptorIsGone`: closed behind its back, so never closed here.
    func lost(_ error: SystemCallError, descriptorIsGone: Bool) {
        let handler = self.handler
        lifecycleLock.withLock {
            lifecycle = .invalidated
            if descriptorIsGone { descriptorReleased = true }
        }
        handler?(.lost(error))
    }

    /// Invalid from now on (an invalidation finishing on the loop's thread, or teardown).
    func markInvalidated() {
        lifecycleLock.withLock { lifecycle = .invalidated }
    }

    /// Entered or left the loop's poll-set table. Loop thread.
    func setInLoopTable(_ inTable: Bool) {
        if inTable && keptWrapper == nil { keptWrapper = wrapper }
        lifecycleLock.withLock { inLoopTable = inTable }
    }

    /// Out of every mode and of the poll set after an invalidation (or teardown): releases
    /// the handler and closes an owned descriptor.
    func removedAfterInvalidation() {
        let wrapper = keptWrapper // released last, when this returns: its deinit finds this source invalid
        keptWrapper = nil
        handler = nil
        releaseDescriptor()
        _ = wrapper
    }

    private func releaseDescriptor() {
        let close = lifecycleLock.withLock { () -> Bool in
            guard ownership == .owned, !descriptorReleased, !inLoopTable else { return false }
            descriptorReleased = true
            return true
        }
        // Not through `systemCall`: `close` must not be retried on EINTR (Linux has closed it).
        if close { Kernel.close(descriptor) }
    }
}
