import Synchronization

extension LocalPort {
    /// Where a port is in its life: open → closing → closed, or open → closed when it is
    /// closed on its owner thread (or freed) without a cross-thread `invalidate()` first.
    enum Lifecycle: UInt8, AtomicRepresentable, Equatable {
        /// Valid: takes messages; may be named, bound and added to modes.
        case open
        /// `invalidate()` was called: no longer valid; its close is queued to its owner thread.
        case closing
        /// Out of every mode, socket closed, name and addresses given back.
        case closed

        /// What happens to a port.
        enum Event {
            /// `invalidate()`, from any thread.
            case invalidate
            /// The teardown itself, on the owner thread (or in `deinit`, or once that thread is gone).
            case close
        }

        /// The state after `event`, and whether the caller has work to do: schedule the
        /// close (`.invalidate`), or tear the port down (`.close`). Each is done at most once.
        static func after(_ event: Event, from state: Lifecycle) -> (next: Lifecycle, act: Bool) {
            switch (event, state) {
            case (.invalidate, .open): (.closing, true)
            case (.invalidate, _): (state, false)
            case (.close, .open), (.close, .closing): (.closed, true)
            case (.close, .closed): (.closed, false)
            }
        }
    }
}
