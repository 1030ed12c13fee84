import Glibc
import RunLoopSystem

/// The shared rings senders gave one port (`SharedRingLayout`), mapped at the first note
/// that names each: by token, with the process that gave it and the side-channel
/// connection it came on. Bounded: one ring per connection (one per sending thread), at
/// most `maxRings`. A ring whose connection closed stays mapped `grace` longer (its last
/// notes may still be on their way, as unclaimed descriptors wait for their messages),
/// then is unmapped; a handler still reading one keeps its mapping until it returns.
///
/// Thread safety: none; the port's loop thread's (`DescriptorReceiver`'s).
struct SharedRingTable {
    private struct Entry {
        let ring: MappedRing
        let pid: pid_t
        let connection: Int32
        /// When its connection closed, or nil while it is open.
        var orphanedAt: Deadline?
    }

    private var entries: [DescriptorToken: Entry] = [:]
    /// The most rings mapped at once.
    let maxRings = 64

    /// What a token names.
    enum Lookup {
        case ring(MappedRing)
        /// A ring, given by another process than the one that names it.
        case anotherProcess
        case unknown
    }

    /// Rings mapped now.
    var count: Int { entries.count }

    func lookup(_ token: DescriptorToken, from pid: pid_t) -> Lookup {
        guard let entry = entries[token] else { return .unknown }
        return entry.pid == pid ? .ring(entry.ring) : .anotherProcess
    }

    /// Whether a ring given on `connection` may be mapped: under `maxRings`, and none from
    /// that connection yet (a closed connection's ring waits out its grace as it is).
    func admits(from connection: Int32, orphaned: Bool) -> Bool {
        entries.count < maxRings
            && (orphaned || !entries.values.contains { $0.connection == connection && $0.orphanedAt == nil })
    }

    mutating func add(_ ring: MappedRing, token: DescriptorToken, pid: pid_t, connection: Int32, orphanedAt: Deadline?) {
        entries[token] = Entry(ring: ring, pid: pid, connection: connection, orphanedAt: orphanedAt)
    }

    /// `connection` closed at `now`: its ring, if any, waits out its grace. Returns whether it had one.
    @discardableResult
    mutating func connectionClosed(_ connection: Int32, at now: Deadline) -> Bool {
        guard let token = entries.first(where: { $0.value.connection == connection && $0.value.orphanedAt == nil })?.key else {
            return false
        }
        entries[token]?.orphanedAt = now
        return true
    }

    var hasOrphans: Bool { entries.values.contains { $0.orphanedAt != nil } }

    /// When the next orphan is unmapped, if any.
    func nextUnmap(grace: Duration) -> Deadline? {
        entries.values.lazy.compactMap { $0.orphanedAt.map { $0 + grace } }.min()
    }

    /// Unmaps the rings whose connection closed `grace` or more before `now`; returns them
    /// (their doorbells are the caller's to close).
    mutating func unmapOrphans(at now: Deadline, grace: Duration) -> [MappedRing] {
        var unmapped: [MappedRing] = []
        for (token, entry) in entries {
            if let orphanedAt = entry.orphanedAt, !(now < orphanedAt + grace) {
                entries[token] = nil
                unmapped.append(entry.ring)
            }
        }
        return unmapped
    }

    /// Unmaps every ring; returns them (their doorbells are the caller's to close).
    mutating func removeAll() -> [MappedRing] {
        defer { entries = [:] }
        return entries.values.map(\.ring)
    }
}
