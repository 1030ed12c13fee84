import RunLoopSystem
import CLinuxPoll
import Dispatch
import Glibc

/// Dispatch's main queue on the main thread's loop, as Core Foundation's run loop services
/// it on Linux: `DispatchQueue.main` work, `@MainActor` jobs and `await MainActor.run`
/// continuations run on the main thread, interleaved with the loop's ports, timers and
/// performs, whenever `ThreadRunLoop.main` runs in a common mode (`MainLoop.run()`, or any
/// run of it in `.default` or another common mode). No other loop ever drains it.
///
/// libdispatch exports two hooks for this (`libdispatch.so`, for `CFRunLoop`):
/// `_dispatch_get_main_queue_handle_4CF()`, an eventfd it writes whenever work is queued
/// to the main queue, and `_dispatch_main_queue_callback_4CF`, which runs what is queued,
/// on the main thread. The loop registers the eventfd in its poll set at its first run in a
/// common mode (and drains then if work was queued before); it is
/// watched only while the running mode is a common one; when it is ready the pass reads
/// it and drains the queue in step 9, as a handled source — as `__CFRunLoopRun` does.
///
/// Like CF, a run nested inside a main-queue block does not drain the queue again (the
/// eventfd leaves the poll set until the drain returns), so nothing spins. Queued
/// main-queue work keeps a common mode of the main loop from being empty (a run of it
/// drains the queue), but, unlike CF, only while work is queued: once the queue is drained
/// a run of an otherwise empty mode returns `.finished`. `MainLoop.run()` keeps the main
/// loop running whatever is queued.
///
/// Programs whose main thread never runs this loop: an `async` `main` (or top-level
/// `await`) parks the main thread in `dispatchMain()` at its first suspension, and
/// `dispatchMain()` ends the main thread; both then run the main queue — and so
/// `@MainActor` code — on Dispatch's own threads, and the main loop never runs again (it
/// is torn down with the thread it was bound to: perform requests for it are cancelled).
/// `MainLoop.run(_:)`, called before the first `await`, keeps the main thread for the
/// main loop. (`MainQueueTests` shows all three with a probe process.)
extension ThreadRunLoop {
    /// Whether a pass in `items`' mode services the main queue: on the main loop, in a
    /// common mode, and not within a drain (a nested run inside a main-queue block).
    func mainQueueWanted(in items: ModeItems) -> Bool {
        isMain && !isDrainingMainQueue && commonModes.contains(items.mode)
    }

    /// On the main loop's first run in a common mode: registers the main queue's eventfd,
    /// and queues a first drain if work is already waiting. libdispatch creates the eventfd
    /// on the first wake-up of the main queue if nobody asked for it yet, and writes it, so
    /// work queued before this run shows as a readable eventfd; a drain queued without
    /// work would count as a handled source that was none of the user's.
    /// Every run asks: the test a worker's loop answers is inlined in it.
    @inline(__always)
    func prepareMainQueueIfNeeded(for mode: LoopMode) {
        guard isMain, descriptors.mainQueue == nil else { return }
        prepareMainQueue(for: mode)
    }

    private func prepareMainQueue(for mode: LoopMode) {
        guard commonModes.contains(mode) else { return }
        let handle = _dispatch_get_main_queue_handle_4CF()
        guard handle >= 0 else { return } // this libdispatch has no main-queue handle
        _ = descriptors.registerMainQueue(handle)
        if isReadable(handle) { descriptors.mainQueueReady() }
    }

    /// Whether the main queue has work for a run in `items`' mode: its eventfd was reported
    /// and not yet serviced, or is readable now (one `poll`, asked only of an otherwise
    /// empty mode).
    func mainQueueHasWork(in items: ModeItems) -> Bool {
        guard mainQueueWanted(in: items), let registration = descriptors.mainQueue else { return false }
        return registration.isReady || isReadable(registration.descriptor)
    }

    /// Whether the main queue's eventfd counts a wake-up not yet read (one `poll`).
    private func isReadable(_ eventfd: Int32) -> Bool {
        var entry = pollfd(fd: eventfd, events: Int16(POLLIN), revents: 0)
        return (try? systemCall("poll(main queue eventfd)") { poll(&entry, 1, 0) }) == 1
    }

    /// A common mode of the main loop that never held an item: made for a run, so that the
    /// main queue's work can run in it.
    func itemsForMainQueue(_ mode: LoopMode) -> ModeItems? {
        guard isMain, commonModes.contains(mode), mainQueueHasWork(in: ModeItems(mode: mode)) else { return nil }
        let items = ModeItems(mode: mode)
        modes[mode] = items
        return items
    }

    /// Step 9 for the main queue: resets the eventfd, then runs what is queued. Work queued
    /// during the drain writes the eventfd again and is run by a later pass.
    func drainMainQueue() {
        guard let registration = descriptors.mainQueue else { return }
        var count: UInt64 = 0
        // EAGAIN: nothing was counted (a wake-up already read).
        _ = try? systemCall("read(main queue eventfd)") { read(registration.descriptor, &count, 8) }
        isDrainingMainQueue = true
        defer { isDrainingMainQueue = false }
        _dispatch_main_queue_callback_4CF(nil)
    }
}
