import Glibc
import RunLoopCore
import RunLoopSystem

/// The receiver's upkeep in its loop's poll set (`watch(on:)`, `LoopHousekeeping`): the
/// listener, each connection's hang-up, and the timerfd that closes what waited past its
/// deadline (orphans `orphanGrace` after their hang-up, a live connection's descriptors
/// `unclaimedLifetime` after they were read, the rings of closed connections).
extension DescriptorReceiver {
    /// Watches the listener, the connections' hang-ups and the timer in `loop`'s poll set,
    /// for the loop's whole life (`LoopHousekeeping`), so that what a gone sender left is
    /// closed without another message. Loop thread only; once.
    package func watch(on loop: ThreadRunLoop) {
        guard !isInvalidated, self.loop == nil else { return }
        self.loop = loop
        watchListener()
        for (fd, connection) in connections where connection.hangUp == nil { watchHangUp(of: fd) }
        armTimer()
    }

    func watchListener() {
        guard let loop, listenerWatch == nil else { return }
        let watch = LoopHousekeeping(descriptor: descriptor, watching: .readable) { [weak self] in
            self?.connectionsPending()
        }
        listenerWatch = watch
        loop.addHousekeeping(watch)
    }

    func watchHangUp(of fd: Int32) {
        guard let loop else { return }
        let watch = LoopHousekeeping(descriptor: fd, watching: .hangUp) { [weak self] in self?.hungUp(fd) }
        connections[fd]?.hangUp = watch
        loop.addHousekeeping(watch)
    }

    /// Removes `watch` from the loop's poll set, before its descriptor closes (the caller's
    /// next step, on the loop's thread); nothing once the loop is gone.
    func unwatch(_ watch: LoopHousekeeping?) {
        guard let watch, let loop, loop.isOwnerThread else { return }
        loop.removeHousekeeping(watch)
    }

    /// Closes `fd`, out of the loop's poll set first (`watch`). Off the loop's thread (a port
    /// released elsewhere), both wait for that thread, as a descriptor source's close does:
    /// closed first, its number could be another registration's by the time the loop took
    /// it out, and the removal would take that one out instead. At once if the loop is gone.
    func close(_ fd: Int32, watchedBy watch: LoopHousekeeping?) {
        if let watch, let loop, !loop.isOwnerThread,
           loop.runOnOwnerThread({ $0.removeHousekeeping(watch); Kernel.close(fd) }) {
            return
        }
        unwatch(watch)
        Kernel.close(fd)
    }

    /// The listener is readable: accepts what is pending.
    private func connectionsPending() {
        guard !isInvalidated else { return }
        acceptPending()
    }

    /// Connection `fd`'s sender hung up: its packets are read to the end, it closes, and
    /// what it attached becomes orphans (`closeConnection`).
    private func hungUp(_ fd: Int32) {
        guard !isInvalidated, connections[fd] != nil else { return }
        while readOne(fd) {}
        closeConnection(fd) // read to its end, it closed; if not, the hang-up would be reported again at once
    }

    /// When `entry`'s descriptors are closed if no message took them.
    private func deadline(of entry: Entry) -> Deadline {
        entry.orphanedAt.map { $0 + orphanGrace } ?? entry.readAt + unclaimedLifetime
    }

    /// Closes the orphans whose grace is over and the live connections' descriptors past
    /// their lifetime (counted `expired`, logged once per sending process), then arms the
    /// timer for the next deadline, or disarms it.
    func closeDue() {
        let now = Deadline.now()
        if rings.hasOrphans { forget(rings.unmapOrphans(at: now, grace: orphanGrace)) }
        guard !entries.isEmpty else { return armTimer() }
        var expired: [pid_t: Int] = [:]
        for (token, entry) in entries where !(now < deadline(of: entry)) {
            guard let descriptors = remove(token) else { continue }
            counters.closedUnclaimed += descriptors.count
            if entry.orphanedAt == nil {
                counters.expired += descriptors.count
                expired[entry.pid, default: 0] += descriptors.count
            }
            descriptors.forEach { $0.close() }
        }
        for (pid, count) in expired {
            RunLoopKitLog.port.warning("descriptors whose message did not come closed unclaimed", metadata: [
                "path": "\(path)", "pid": "\(pid)", "count": "\(count)", "after": "\(unclaimedLifetime)",
            ])
        }
        armTimer()
    }

    func disarmTimer() {
        timerArmedAt = nil
        try? Kernel.setTimer(timer, at: nil)
    }

    /// The timer fired (or fires early, armed for a deadline since taken): closes what is due.
    private func timerFired() {
        guard !isInvalidated else { return }
        disarmTimer() // no longer readable
        if listenerWatch == nil { acceptPending() } // an accept failed: tried again
        closeDue()
    }

    /// Arms the timer for `deadline` if it is sooner than its arming; with none, for the
    /// earliest deadline of what waits, or disarms it when nothing does. Only on a watched
    /// receiver; the timerfd is made at the first arming (if it cannot be, what is due
    /// closes at the next `take` or `drain()`).
    func armTimer(before deadline: Deadline? = nil) {
        guard let loop, loop.isOwnerThread, !isInvalidated else { return }
        let next: Deadline?
        if let deadline {
            guard timerArmedAt.map({ deadline < $0 }) ?? true else { return }
            next = deadline
        } else {
            next = [entries.values.lazy.map(deadline(of:)).min(), rings.nextUnmap(grace: orphanGrace)].compactMap { $0 }.min()
        }
        guard next != timerArmedAt else { return }
        if timer < 0 {
            guard next != nil else { return }
            do {
                timer = try Kernel.timerDescriptor()
            } catch {
                RunLoopKitLog.port.debug("descriptor side channel: no timer", metadata: ["path": "\(path)", "error": "\(error)"])
                return
            }
            let watch = LoopHousekeeping(descriptor: timer, watching: .readable) { [weak self] in self?.timerFired() }
            timerWatch = watch
            loop.addHousekeeping(watch)
        }
        do {
            try Kernel.setTimer(timer, at: next)
            timerArmedAt = next
        } catch {
            timerArmedAt = nil
        }
    }

    /// Closes the descriptors whose connection closed before `cutoff` and that no message
    /// took: a sender killed between its `attach` and its message, or whose message was lost.
    package func closeOrphans(before cutoff: Deadline) {
        for (token, entry) in entries {
            if let orphaned = entry.orphanedAt, orphaned < cutoff, let descriptors = remove(token) {
                counters.closedUnclaimed += descriptors.count
                descriptors.forEach { $0.close() }
            }
        }
        armTimer()
    }
}
