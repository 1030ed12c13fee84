import CLinuxPoll
import Glibc

/// A descriptor a loop watches for its own upkeep, in every mode, for the loop's whole life:
/// not a source of any mode. Its handler never counts as a handled source
/// (`run(mode:before:)` does not return for it), a run in a mode without sources still
/// finishes, and no snapshot shows it. A named port's descriptor side channel is one user:
/// its listener, its senders' hang-ups and its timer (`DescriptorReceiver`), so that what
/// a dead sender left is closed whatever the loop runs.
///
/// Level-triggered, as a descriptor source: the handler must consume what made the
/// descriptor ready (accept, read, close it) or stop watching it, else every sleep returns
/// at once. Unlike a descriptor source, it is not looked at while a port of the running
/// mode has messages to deliver (it waits for the port's drain), so it costs a busy port's
/// passes nothing.
///
/// Thread safety: loop thread only. Sendable (unchecked) only so that its removal can be
/// handed to its loop's thread (`runOnOwnerThread`); its handler is only ever called there.
package final class LoopHousekeeping: @unchecked Sendable {
    /// What the descriptor is watched for.
    package enum Interest: Sendable {
        /// Readable (`EPOLLIN`): a listener's pending connection, a timerfd's expiry.
        case readable
        /// The peer hung up (`EPOLLRDHUP`; `EPOLLHUP` comes unasked), and nothing else: what
        /// it sent stays queued, unread, until the handler reads it.
        case hangUp
    }

    package let descriptor: Int32
    package let interest: Interest
    let handler: () -> Void

    package init(descriptor: Int32, watching interest: Interest, handler: @escaping () -> Void) {
        self.descriptor = descriptor
        self.interest = interest
        self.handler = handler
    }

    var epollEvents: UInt32 {
        switch interest {
        case .readable: EPOLLIN.rawValue
        case .hangUp: EPOLLRDHUP.rawValue
        }
    }
}

extension ThreadRunLoop {
    /// Watches `housekeeping`'s descriptor from the next sleep on, in every mode. Loop thread only.
    package func addHousekeeping(_ housekeeping: LoopHousekeeping) {
        assertOwnerThread()
        guard lifecycle == .open else { return }
        descriptors.registerHousekeeping(housekeeping)
    }

    /// Stops watching `housekeeping`'s descriptor, at once: its owner may close it next.
    /// Loop thread only.
    package func removeHousekeeping(_ housekeeping: LoopHousekeeping) {
        assertOwnerThread()
        descriptors.unregisterHousekeeping(housekeeping, poller: poller)
    }
}
