import CSignalRelay
import Glibc

/// The process-wide side of signal sources: which signals RunLoopKit handles, the action
/// each had before, and the eventfd of every watcher.
///
/// The handler itself is C (`CSignalRelay`), because a signal handler may only do
/// async-signal-safe work: it writes 1 to each watcher's eventfd and nothing else, so an
/// eventfd's counter is the number of deliveries since its loop last read it. No signal
/// mask is needed, and none is changed: the signal is handled on whichever thread the
/// kernel picks, and each watching loop hears of it on its own thread through its eventfd.
/// (A signal blocked in every thread stays pending and is never delivered; `dispatchMain()`
/// blocks signals in the main thread only.)
///
/// The first watcher of a signal installs the handler (`sigaction`, saving the previous
/// action); the last one to go restores the previous action exactly.
///
/// Thread safety: all from any thread, under `lock`.
package enum SignalRelay {
    private struct Installed {
        /// The action before RunLoopKit's, as raw bytes of a `struct sigaction`.
        let previous: UnsafeMutableRawPointer
        var watchers: Int
    }

    private static let lock = Lock()
    nonisolated(unsafe) private static var installed: [Int32: Installed] = [:] // protected by lock

    /// Starts relaying `signal` to `eventfd`; returns the slot to give back to `remove`.
    package static func add(_ signal: UnixSignal, eventfd: Int32) throws(SystemCallError) -> Int32 {
        try lock.withLock { () -> Result<Int32, SystemCallError> in
            let signo = signal.rawValue
            if installed[signo] == nil {
                let previous = UnsafeMutableRawPointer.allocate(byteCount: Int(rlk_sigaction_size()), alignment: 16)
                do throws(SystemCallError) {
                    try systemCall("sigaction(\(signal))") {
                        rlk_signal_relay_install(signo, previous.assumingMemoryBound(to: sigaction.self))
                    }
                } catch {
                    previous.deallocate()
                    return .failure(error)
                }
                installed[signo] = Installed(previous: previous, watchers: 0)
            }
            let slot = rlk_signal_relay_add(signo, eventfd)
            guard slot >= 0 else {
                restoreIfUnwatched(signo)
                return .failure(SystemCallError(call: "signal relay for \(signal) (at most \(RLK_SIGNAL_RELAY_SLOTS) watchers)",
                                                errno: EMFILE))
            }
            installed[signo]!.watchers += 1
            return .success(slot)
        }.get()
    }

    /// Stops relaying to a slot; once this returns, no handler writes to its eventfd. The
    /// last watcher of a signal restores the action it had before.
    package static func remove(_ signal: UnixSignal, slot: Int32) {
        lock.withLock {
            rlk_signal_relay_remove(signal.rawValue, slot)
            installed[signal.rawValue]?.watchers -= 1
            restoreIfUnwatched(signal.rawValue)
        }
    }

    /// Whether RunLoopKit's handler is `signal`'s action now.
    package static func isInstalled(_ signal: UnixSignal) -> Bool {
        rlk_signal_relay_is_installed(signal.rawValue) != 0
    }

    private static func restoreIfUnwatched(_ signo: Int32) {
        guard let entry = installed[signo], entry.watchers == 0 else { return }
        _ = try? systemCall("sigaction(restore)") {
            rlk_signal_relay_restore(signo, entry.previous.assumingMemoryBound(to: sigaction.self))
        }
        entry.previous.deallocate()
        installed[signo] = nil
    }
}
