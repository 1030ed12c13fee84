import Glibc
import RunLoopCore
import RunLoopSystem

/// The shared rings senders give through the side channel (`docs/wire-format.md`, "Shared
/// memory"): each mapped at the first note that names it (`ring(_:from:)`), its sender
/// given a doorbell to queue notes in it (`QueuedNote`), the queues the port reads and
/// arms, and the doorbells closed once their rings are unmapped.
extension DescriptorReceiver {
    /// The shared ring process `pid` gave under `token` (its descriptor attached under it,
    /// named by the first note that uses it), mapped at that first note; nil (counted) for
    /// a token that names no ring from that process, or a ring refused (`MappedRing`'s
    /// checks, `SharedRingTable`'s bounds).
    func ring(_ token: DescriptorToken, from pid: pid_t) -> MappedRing? {
        switch rings.lookup(token, from: pid) {
        case .ring(let ring):
            // A note or a fence: queued notes after it, or before the message after it, are next.
            slot?.queuedNotesMayWait = true
            return ring
        case .anotherProcess:
            counters.unknownTokens += 1
            return nil
        case .unknown:
            break
        }
        if entries[token] == nil { read(until: token) }
        guard let entry = entries[token], entry.pid == pid, let descriptors = remove(token) else {
            counters.unknownTokens += 1
            return nil
        }
        defer { descriptors.forEach { $0.close() } } // a mapping outlives its descriptor
        guard descriptors.count == 1, let fd = descriptors[0].descriptor,
              rings.admits(from: entry.connection, orphaned: entry.orphanedAt != nil) else {
            counters.ringsRefused += 1
            return nil
        }
        let ring: MappedRing
        do {
            ring = try MappedRing(checking: fd)
        } catch {
            counters.ringsRefused += 1
            RunLoopKitLog.port.warning("a sender's shared ring refused", metadata: [
                "path": "\(path)", "pid": "\(pid)", "reason": "\(error)",
            ])
            return nil
        }
        counters.ringsMapped += 1
        rings.add(ring, token: token, pid: pid, connection: entry.connection, orphanedAt: entry.orphanedAt)
        if let orphanedAt = entry.orphanedAt {
            armTimer(before: orphanedAt + orphanGrace)
        } else {
            giveDoorbell(for: ring, token: token, on: entry.connection)
        }
        return ring
    }

    /// Gives the sender of `ring` a doorbell (`DescriptorPacket.doorbell`) on its live
    /// connection, if the receiver is watched: one end of a unix socket pair, whose other
    /// end joins the loop's poll set. From then on the sender may queue notes in the ring
    /// (`QueuedNote`), and rings when the port armed the ring (`MappedRing.arm()`). Best
    /// effort: without one, every note comes over ZeroMQ.
    private func giveDoorbell(for ring: MappedRing, token: DescriptorToken, on connection: Int32) {
        guard let loop, loop.isOwnerThread, let sender = connections[connection]?.sender,
              let (own, given) = try? Kernel.unixPacketPair() else { return }
        defer { Kernel.close(given) } // the sender has its own once sent
        let sent = (try? DescriptorPacket.doorbell(token).withUnsafeBytes { bytes throws(SystemCallError) in
            try Kernel.sendWithDescriptors(connection, bytes, descriptors: [given])
        }) ?? false
        guard sent else { return Kernel.close(own) }
        let watch = LoopHousekeeping(descriptor: own, watching: .readable) { [weak self, weak ring] in
            if let ring { self?.doorbellRang(ring) }
        }
        loop.addHousekeeping(watch)
        ring.queueOpen = true
        queues.append((ring, sender))
        ring.doorbell = own
        ring.doorbellWatch = watch
        _ = ring.arm()
        onQueuedNotes?()
    }

    /// A sender rang its doorbell: what it sent is read (it only wakes), and the port is
    /// told (`onQueuedNotes`), which delivers the queued notes in one of its modes.
    /// Once the sender closed its end (it ended), the doorbell closes; what it queued is
    /// still delivered, until the ring is unmapped.
    private func doorbellRang(_ ring: MappedRing) {
        let fd = ring.doorbell
        guard fd >= 0 else { return }
        var bytes = (UInt64(0), UInt64(0))
        while true {
            let read: Int
            do {
                read = try withUnsafeMutableBytes(of: &bytes) { buffer throws(SystemCallError) in try Kernel.read(fd, into: buffer) }
            } catch where error.code == .interrupted {
                continue
            } catch where error.code == .again {
                break
            } catch {
                read = 0
            }
            if read == 0 { // the sender's end closed (or failed): no more rings
                closeDoorbells(of: [ring])
                break
            }
        }
        onQueuedNotes?()
    }

    /// A queued note that may be delivered now, its ring and who sent it (counted
    /// `queuedNotes`; `MappedRing.take(_:)` it as it is delivered).
    func nextQueuedNote() -> (MappedRing, QueuedNote, MessageSenderBox)? {
        for (ring, sender) in queues {
            if let note = ring.nextQueued() { return (ring, note, sender) }
        }
        return nil
    }

    /// Asks every sender with a doorbell to ring it at its next queued note: true if a
    /// note may be delivered now.
    func armQueues() -> Bool {
        var ready = false
        for (ring, _) in queues where ring.arm() { ready = true }
        return ready
    }

    /// Counts a fence read (`Counters.fences`).
    func countFence() { counters.fences += 1 }

    /// Counts a shared data component found in its ring, by a note over ZeroMQ or `queued`.
    func countSharedComponent(queued: Bool) {
        counters.sharedComponents += 1
        if queued { counters.queuedNotes += 1 }
    }

    /// Rings no longer mapped: their queues are not read again, their doorbells close.
    func forget(_ unmapped: [MappedRing]) {
        guard !unmapped.isEmpty else { return }
        queues.removeAll { entry in unmapped.contains { $0 === entry.ring } }
        closeDoorbells(of: unmapped)
    }

    /// Closes the doorbells of `rings`.
    private func closeDoorbells(of rings: [MappedRing]) {
        for ring in rings where ring.doorbell >= 0 {
            close(ring.doorbell, watchedBy: ring.doorbellWatch)
            ring.doorbell = -1
            ring.doorbellWatch = nil
        }
    }

    /// Shared rings mapped now.
    package var mappedRingCount: Int { rings.count }
}
