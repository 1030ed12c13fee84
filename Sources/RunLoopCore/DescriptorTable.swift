import RunLoopSystem
import CLinuxPoll
import Glibc

/// Every descriptor a loop watches in its poll set — its ports' descriptors, its descriptor
/// sources (signal and child-process sources are descriptor sources too) and, on the main
/// thread's loop, Dispatch's main queue — with what each is watched for. Loop thread only.
///
/// One mechanism for all of them, after libuv's `uv__io_start`/`uv__io_stop`: a client
/// says what it wants by marking its registration changed (`markChanged`), and the table
/// brings the poll set in line once, just before the loop's next sleep (`applyChanges`):
/// `EPOLL_CTL_ADD` when a descriptor starts being wanted, `MOD` when what is wanted
/// changes, `DEL` when nothing is (so a paused port or a disabled, hung-up pipe cannot wake
/// the loop). What a descriptor source wants depends on the mode being run — it is watched
/// only while its loop runs in one of its modes — so a run in another mode than the last
/// sleep's brings every source in line again; a loop without descriptor sources pays
/// nothing for that.
///
/// Ports stay as they were otherwise (`PortSourceTable`): edge-triggered descriptors whose
/// readiness is confirmed with `hasPendingMessage()`; a port's report hands the wait its port source
/// at once. Descriptor sources and the main queue are level-triggered: their ready events
/// wait here until step 9 of the pass hands them out.
struct DescriptorTable {
    /// Who a registration is for: what a report of the poll set hands on, with nothing
    /// more to look up (SwiftNIO's `Registration` carries its channel the same way).
    enum Client {
        /// A port source. Its registration holds it while the registration is in the table:
        /// a report, found by token, can only carry a port that is still in the loop.
        case port(PortSourceTable.Entry)
        case source(DescriptorSource)
        /// Dispatch's main queue (main thread's loop only; see `ThreadRunLoop+MainQueue`).
        case mainQueue
        /// The loop's own upkeep, watched in every mode (`LoopHousekeeping`).
        case housekeeping(LoopHousekeeping)
    }

    /// One descriptor in (or wanting to be in) the poll set.
    final class Registration {
        let descriptor: Int32
        /// What the poll set reports it by: its slot in the table plus one in the low 32
        /// bits, a serial number in the high 32 (see `DescriptorTable.slots`).
        let token: UInt64
        let client: Client
        /// Its index in the table's `slots`.
        var slot: Int { DescriptorTable.slot(of: token) }
        // Loop thread only, like the table; see architecture.md, exclusivity checks.
        /// The events the poll set watches for now; 0 when the descriptor is not in it.
        @exclusivity(unchecked) var registeredEvents: UInt32 = 0
        /// For sources: how many of the loop's modes hold it.
        @exclusivity(unchecked) var modeCount = 0
        /// Events the last wait reported, not yet handed out (sources and the main queue).
        @exclusivity(unchecked) var readyEvents: UInt32 = 0
        /// Why the poll set refused the descriptor, to be told in step 9.
        @exclusivity(unchecked) var lostError: SystemCallError?
        /// Whether it is in `changed` / in `ready`, so queueing never searches.
        @exclusivity(unchecked) var isChanged = false
        @exclusivity(unchecked) var isReady = false

        init(descriptor: Int32, token: UInt64, client: Client) {
            self.descriptor = descriptor
            self.token = token
            self.client = client
        }
    }

    /// The registrations by slot, so that a report of the poll set finds its registration
    /// by an index, not a hash (libuv's `watchers` array, which is indexed by descriptor).
    /// A slot is reused once free, so a token also carries a serial number: a report still
    /// in flight for a registration gone is not taken for its slot's next one.
    private var slots: [Registration?] = []
    private var freeSlots: [Int] = []
    /// The next token's serial number; never 0, so no token is `Poller.wakeToken` (0).
    private var nextSerial: UInt64 = 1
    private var bySource: [ObjectIdentifier: Registration] = [:]
    private var byHousekeeping: [ObjectIdentifier: Registration] = [:]
    /// Registrations whose wanted events may differ from their registered ones.
    private var changed: [Registration] = []
    /// Level-triggered registrations with events (or a loss) to hand out, in the order seen.
    private(set) var ready: [Registration] = []
    /// The mode the poll set was last brought in line for, and whether the main queue was
    /// wanted then: a different one brings every source in line again.
    private var appliedMode: ObjectIdentifier?
    private var appliedMainQueueWanted = false
    /// The main queue's registration, made on the main loop's first run.
    private(set) var mainQueue: Registration?

    /// Whether any level-triggered descriptor is watched now: then a pass that has a port
    /// message to deliver still looks at the poll set, so that a busy port cannot starve them.
    var watchesLevelTriggered: Bool { levelTriggeredWatched > 0 }
    private var levelTriggeredWatched = 0

    // MARK: - Registering

    /// A registration for a port's descriptor, carrying its port source; it wants `EPOLLIN`
    /// from the next sleep on, unless the port is paused.
    mutating func registerPort(_ descriptor: Int32, _ port: PortSourceTable.Entry) -> Registration {
        let registration = makeRegistration(descriptor, .port(port))
        markChanged(registration)
        return registration
    }

    /// Counts one more mode for `source`, registering it the first time. Returns its registration.
    @discardableResult
    mutating func sourceAdded(_ source: DescriptorSource) -> Registration {
        let id = ObjectIdentifier(source)
        if let registration = bySource[id] {
            registration.modeCount += 1
            return registration
        }
        let registration = makeRegistration(source.descriptor, .source(source))
        registration.modeCount = 1
        bySource[id] = registration
        source.setInLoopTable(true)
        markChanged(registration)
        return registration
    }

    /// Counts one mode less for `source`; in none, takes it out of the poll set at once
    /// (its owner may close the descriptor next) and forgets it. Returns whether it left.
    @discardableResult
    mutating func sourceRemoved(_ source: DescriptorSource, poller: Poller) -> Bool {
        guard let registration = bySource[ObjectIdentifier(source)] else { return false }
        registration.modeCount -= 1
        if registration.modeCount > 0 {
            markChanged(registration) // may no longer be in the running mode
            return false
        }
        bySource[ObjectIdentifier(source)] = nil
        unregister(registration, poller: poller)
        source.setInLoopTable(false)
        return true
    }

    /// The main queue's registration, wanting `EPOLLIN` whenever the loop runs in a common mode.
    mutating func registerMainQueue(_ descriptor: Int32) -> Registration {
        if let mainQueue { return mainQueue }
        let registration = makeRegistration(descriptor, .mainQueue)
        mainQueue = registration
        appliedMode = nil // bring it in line at the next sleep
        return registration
    }

    /// A registration for `housekeeping`'s descriptor, wanted in every mode from the next sleep on.
    mutating func registerHousekeeping(_ housekeeping: LoopHousekeeping) {
        let id = ObjectIdentifier(housekeeping)
        guard byHousekeeping[id] == nil else { return }
        let registration = makeRegistration(housekeeping.descriptor, .housekeeping(housekeeping))
        byHousekeeping[id] = registration
        markChanged(registration)
    }

    /// Takes `housekeeping`'s descriptor out of the poll set at once and forgets it.
    mutating func unregisterHousekeeping(_ housekeeping: LoopHousekeeping, poller: Poller) {
        guard let registration = byHousekeeping.removeValue(forKey: ObjectIdentifier(housekeeping)) else { return }
        unregister(registration, poller: poller)
    }

    /// Whether `registration` is still in the table (a handler run before it may have removed it).
    func isRegistered(_ registration: Registration) -> Bool { holds(registration) }

    /// Takes a registration out of the poll set at once and forgets it. Nothing of the
    /// table holds it afterwards, so it keeps no port source alive.
    mutating func unregister(_ registration: Registration, poller: Poller) {
        if registration.registeredEvents != 0 {
            // The descriptor may already be closed (a port's socket, a source's lost descriptor).
            try? poller.deregister(registration.descriptor)
            setRegistered(registration, 0)
        }
        if holds(registration) {
            slots[registration.slot] = nil
            freeSlots.append(registration.slot)
        }
        if registration.isReady { ready.removeAll { $0 === registration } }
        registration.isReady = false
        registration.readyEvents = 0
        if registration.isChanged { changed.removeAll { $0 === registration } }
        registration.isChanged = false
    }

    func registration(of source: DescriptorSource) -> Registration? { bySource[ObjectIdentifier(source)] }

    /// What a port or source wants may have changed: brought in line before the next sleep.
    mutating func markChanged(_ registration: Registration) {
        guard !registration.isChanged else { return }
        registration.isChanged = true
        changed.append(registration)
    }

    // MARK: - Before the sleep

    /// Brings the poll set in line with what each registration wants while the loop runs
    /// `items`' mode (`mainQueueWanted`: the main queue is to be serviced in it). A
    /// source's descriptor the kernel refuses is queued as ready with its error, for step
    /// 9. A port's or the main queue's refused (the poll set cannot be made at the
    /// descriptor limit, or the kernel is out of memory or of epoll watches) stays marked
    /// changed, to be tried again at the next sleep, and the first such error is thrown
    /// once every other change is applied: the run ends with it (`RunResult.failed`).
    mutating func applyChanges(runningMode items: ModeItems, mainQueueWanted: Bool, poller: Poller) throws(SystemCallError) {
        let mode = ObjectIdentifier(items)
        if mode != appliedMode || mainQueueWanted != appliedMainQueueWanted {
            appliedMode = mode
            appliedMainQueueWanted = mainQueueWanted
            for registration in bySource.values { markChanged(registration) }
            if let mainQueue { markChanged(mainQueue) }
        }
        guard !changed.isEmpty else { return }
        let batch = changed
        changed.removeAll(keepingCapacity: true)
        var refused: (error: SystemCallError, registrations: [Registration])?
        for registration in batch {
            registration.isChanged = false
            guard holds(registration) else { continue } // marked after it left the table
            let wanted = wantedEvents(registration, items, mainQueueWanted)
            guard wanted != registration.registeredEvents else { continue }
            if let error = apply(wanted, to: registration, poller: poller) {
                refused = (refused?.error ?? error, (refused?.registrations ?? []) + [registration])
            }
        }
        guard let refused else { return }
        for registration in refused.registrations { markChanged(registration) }
        throw refused.error
    }

    /// Whether the poll set is not yet in line with what `items`' mode wants: changes made
    /// since the last sleep, or another mode than that sleep's. A pass with a port message
    /// to deliver then still goes through the (looking-only) sleep, which applies them, so
    /// that a port ready from the start cannot keep a new descriptor out of the poll set.
    func needsApplying(for items: ModeItems) -> Bool {
        !changed.isEmpty || (ObjectIdentifier(items) != appliedMode && (!bySource.isEmpty || mainQueue != nil))
    }

    private func wantedEvents(_ registration: Registration, _ items: ModeItems, _ mainQueueWanted: Bool) -> UInt32 {
        switch registration.client {
        case .port(let port): return port.isPaused ? 0 : EPOLLIN.rawValue
        case .mainQueue: return mainQueueWanted ? EPOLLIN.rawValue : 0
        case .housekeeping(let housekeeping): return housekeeping.epollEvents
        case .source(let source):
            guard registration.lostError == nil, items.contains(.descriptor(source)) else { return 0 }
            return source.wantedEpollEvents
        }
    }

    /// Applies one change; returns the error of a port or the main queue the kernel refused.
    private mutating func apply(_ wanted: UInt32, to registration: Registration, poller: Poller) -> SystemCallError? {
        let fd = registration.descriptor, token = registration.token
        do {
            switch (registration.registeredEvents, wanted) {
            case (0, _): try poller.register(fd, token: token, events: wanted)
            case (_, 0): try poller.deregister(fd)
            default: try poller.modify(fd, token: token, events: wanted)
            }
            setRegistered(registration, wanted)
            return nil
        } catch {
            guard case .source = registration.client else {
                // A removal that fails left nothing in the set (the descriptor is closed).
                guard wanted != 0 else { setRegistered(registration, 0); return nil }
                return error
            }
            setRegistered(registration, 0)
            registration.lostError = error
            enqueueReady(registration)
            return nil
        }
    }

    private mutating func setRegistered(_ registration: Registration, _ events: UInt32) {
        // Housekeeping waits for a busy port's drain: it does not make every pass look.
        let levelTriggered: Bool
        switch registration.client {
        case .port, .housekeeping: levelTriggered = false
        case .source, .mainQueue: levelTriggered = true
        }
        if levelTriggered {
            if registration.registeredEvents == 0 && events != 0 { levelTriggeredWatched += 1 }
            if registration.registeredEvents != 0 && events == 0 { levelTriggeredWatched -= 1 }
        }
        registration.registeredEvents = events
    }

    // MARK: - After the sleep

    /// The wait reported `token`: a port's source is returned, for `PortSourceTable` to queue;
    /// a source's or the main queue's events wait here for step 9. A token whose registration
    /// is gone (its slot free, or reused with another serial number) reports nothing.
    mutating func reported(_ token: UInt64, events: UInt32) -> PortSourceTable.Entry? {
        let slot = DescriptorTable.slot(of: token)
        guard slot >= 0, slot < slots.count, let registration = slots[slot], registration.token == token else {
            return nil // gone since the poll set reported it
        }
        if case .port(let port) = registration.client { return port }
        registration.readyEvents |= events
        enqueueReady(registration)
        return nil
    }

    /// Makes the main queue's registration ready without a report (its first service).
    mutating func mainQueueReady() {
        guard let mainQueue else { return }
        mainQueue.readyEvents |= EPOLLIN.rawValue
        enqueueReady(mainQueue)
    }

    /// Takes the ready registrations, for step 9; each is handed out once per report.
    mutating func takeReady() -> [Registration] {
        let taken = ready
        ready.removeAll(keepingCapacity: true)
        for registration in taken { registration.isReady = false }
        return taken
    }

    /// Every source registered, for teardown.
    var allSources: [DescriptorSource] {
        bySource.values.compactMap { if case .source(let source) = $0.client { source } else { nil } }
    }

    private mutating func enqueueReady(_ registration: Registration) {
        guard !registration.isReady else { return }
        registration.isReady = true
        ready.append(registration)
    }

    /// A registration in a free slot, with a fresh token.
    private mutating func makeRegistration(_ descriptor: Int32, _ client: Client) -> Registration {
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
        } else {
            slot = slots.count
            slots.append(nil)
        }
        precondition(slot < 0xFFFF_FFFE, "a loop with four billion descriptors")
        let registration = Registration(descriptor: descriptor, token: nextSerial << 32 | UInt64(slot + 1), client: client)
        nextSerial += 1
        slots[slot] = registration
        return registration
    }

    /// The slot a token names (-1 for `Poller.wakeToken`'s low bits, which no token has).
    static func slot(of token: UInt64) -> Int {
        Int(truncatingIfNeeded: token & 0xFFFF_FFFF) &- 1
    }

    /// Whether `registration` is still in the table.
    private func holds(_ registration: Registration) -> Bool {
        slots[registration.slot] === registration
    }
}
