import RunLoopSystem
import CLinuxPoll
import Glibc

/// A UNIX signal as a run-loop source: each delivery of the signal to the process is an
/// event on the thread of every loop that watches it, with the number of deliveries since
/// the handler was last called (a signal delivered three times while the loop was busy
/// makes one call with 3).
///
///     let hangUps = try SignalSource(.hangUp) { count in reloadConfiguration() }
///     ThreadRunLoop.current.add(hangUps, to: .common)
///
/// It watches from creation: from then until `invalidate()` (or its release) the signal
/// no longer has its previous action (for `SIGINT`, ending the process); when the last
/// source of a signal goes, the previous action is restored. Two sources of one signal —
/// on one loop or on two — each hear every delivery.
///
/// How: a C handler that only writes to an eventfd per watcher (async-signal-safe; see
/// `SignalRelay`); the eventfd is a `DescriptorSource` of the loop, so the signal source
/// lives in modes, is enabled and disabled, and counts as a handled source like any other.
/// No signal mask is needed. Deliveries the kernel merges (a standard signal sent again
/// while still pending) count once, as for any handler.
///
/// Once added to a loop, the loop keeps the source until it is invalidated; a source on no
/// loop stops watching when released.
///
/// Thread safety: `invalidate()` and `isValid` from any thread; the handler runs on the
/// loop's thread.
public final class SignalSource: @unchecked Sendable {
    public let signal: UnixSignal
    /// The eventfd the relay counts deliveries in, watched by the loop.
    let descriptorSource: DescriptorSource
    private let relaySlot: Int32
    private let relayed = LockedValue(true) // whether the relay still writes to the eventfd

    /// Starts watching `signal`; `handler` gets the number of deliveries since its last call.
    /// Throws if the eventfd or the signal's action cannot be set up (an invalid signal,
    /// `SIGKILL` or `SIGSTOP`: `EINVAL`).
    public init(_ signal: UnixSignal, handler: @escaping (Int) -> Void) throws(SystemCallError) {
        self.signal = signal
        let counter = try systemCall("eventfd") { eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK)) }
        do {
            relaySlot = try SignalRelay.add(signal, eventfd: counter)
        } catch {
            Kernel.close(counter)
            throw error
        }
        descriptorSource = DescriptorSource(descriptor: counter, watching: .readable, ownership: .owned) { event in
            guard case .ready = event else { return } // an eventfd of our own is never lost
            var count: UInt64 = 0
            guard (try? systemCall("read(signal eventfd)") { read(counter, &count, 8) }) == 8, count > 0 else { return }
            handler(Int(clamping: count))
        }
        descriptorSource.wrapper = self
    }

    deinit { invalidate() }

    public var isValid: Bool { descriptorSource.isValid }

    /// Stops watching: the signal's previous action comes back if this was its last source,
    /// and the source leaves its loop's modes. Any thread.
    public func invalidate() {
        stopRelaying()
        descriptorSource.invalidate() // closes the eventfd once out of the poll set
    }

    private func stopRelaying() {
        let wasRelayed = relayed.withLock { relayed in
            defer { relayed = false }
            return relayed
        }
        if wasRelayed { SignalRelay.remove(signal, slot: relaySlot) }
    }
}

extension ThreadRunLoop {
    /// Adds a signal source to `mode`: its handler is called on this loop's thread while the
    /// loop runs in one of its modes (deliveries meanwhile are counted, not lost).
    public func add(_ source: SignalSource, to mode: LoopMode = .default) {
        add(source.descriptorSource, to: mode)
    }

    public func remove(_ source: SignalSource, from mode: LoopMode = .default) {
        remove(source.descriptorSource, from: mode)
    }

    public func contains(_ source: SignalSource, in mode: LoopMode = .default) -> Bool {
        contains(source.descriptorSource, in: mode)
    }
}
