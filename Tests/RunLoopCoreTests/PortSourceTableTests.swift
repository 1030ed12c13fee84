import CLinuxPoll
import Glibc
@testable import RunLoopCore
import RunLoopTestSupport
import XCTest

/// The port sources' table on its own, with fake ports: which ports it queues as ready,
/// when it asks a socket, how it counts modes, and pausing. The poll set is a real one
/// (a `Poller` and eventfds standing in for `ZMQ_FD`s), so registrations are checked
/// against what the kernel was told.
final class PortSourceTableTests: XCTestCase {
    /// What a test works on, made for it and let go after it: XCTest keeps every test-case
    /// object until the process exits, and LeakSanitizer reports what they still hold.
    private final class Fixture {
        var table = PortSourceTable()
        var descriptors = DescriptorTable()
        let poller = Poller()
    }

    private var fixture: Fixture?
    private var table: PortSourceTable {
        get { fixture!.table }
        set { fixture!.table = newValue }
    }
    private var descriptors: DescriptorTable {
        get { fixture!.descriptors }
        set { fixture!.descriptors = newValue }
    }
    private var poller: Poller { fixture!.poller }

    override func setUp() {
        super.setUp()
        fixture = Fixture()
    }

    override func tearDown() {
        fixture = nil
        super.tearDown()
    }

    private func mode(_ name: String, holding ports: FakePort...) -> ModeItems {
        let items = ModeItems(mode: LoopMode(name))
        for port in ports { XCTAssertTrue(items.insert(.port(port))) }
        return items
    }

    /// The port sources the poll set reports ready now, looked at without sleeping, as a
    /// loop's sleep reads them.
    private func reportedPorts() throws -> [PortSourceTable.Entry] {
        let count = try poller.wait(until: .now(), poll: true)
        return (0..<count).compactMap { index in
            let (token, events) = poller.readyDescriptor(at: index)
            return descriptors.reported(token, events: events)
        }
    }

    private func applyChanges(for items: ModeItems) {
        XCTAssertNoThrow(try descriptors.applyChanges(runningMode: items, mainQueueWanted: false, poller: poller))
    }

    private func entry(of port: FakePort, in items: ModeItems) throws -> PortSourceTable.Entry {
        let entry = try XCTUnwrap(table.nextReady(in: items), "a ready port")
        XCTAssertTrue(entry.port === port)
        return entry
    }

    /// The registration of `port`'s descriptor, while the port is in a mode.
    private func registration(of port: FakePort) throws -> DescriptorTable.Registration {
        try XCTUnwrap(table.registration(of: port), "a registered port")
    }

    /// Takes `port`'s entry as the pass does and tells what the receive found.
    private func deliver(from port: FakePort, in items: ModeItems, _ outcome: PortDelivery) throws {
        let entry = try entry(of: port, in: items)
        table.willDeliver(from: entry)
        table.didDeliver(from: entry, outcome)
    }

    func testAnAddedPortIsQueuedAsReadyWithoutItsSocketBeingAsked() throws {
        let port = try FakePort()
        let items = mode("a", holding: port)
        XCTAssertTrue(table.isEmpty)
        XCTAssertFalse(table.isQueuedAsReady(port))
        table.added(port, descriptors: &descriptors)
        XCTAssertFalse(table.isEmpty)
        XCTAssertTrue(table.isQueuedAsReady(port), "a burst may have come before it was added")
        XCTAssertTrue(try entry(of: port, in: items).port === port)
        XCTAssertEqual(port.asked, 0, "processing the socket's commands first could lose a closing peer's reply")
        XCTAssertTrue(descriptors.needsApplying(for: items), "it joins the poll set before the next sleep")
        applyChanges(for: items)
        XCTAssertEqual(try registration(of: port).registeredEvents, EPOLLIN.rawValue)
    }

    func testAPortInSeveralModesLeavesThePollSetOnlyWhenRemovedFromTheLast() throws {
        let port = try FakePort()
        let items = mode("a", holding: port)
        table.added(port, descriptors: &descriptors)
        let first = try entry(of: port, in: items)
        table.added(port, descriptors: &descriptors)
        table.added(port, descriptors: &descriptors)
        XCTAssertTrue(try entry(of: port, in: items) === first, "one entry, three modes")
        XCTAssertEqual(first.modeCount, 3)
        applyChanges(for: items)
        let registered = try registration(of: port)
        XCTAssertEqual(registered.registeredEvents, EPOLLIN.rawValue)

        table.removed(port, descriptors: &descriptors, poller: poller)
        table.removed(port, descriptors: &descriptors, poller: poller)
        XCTAssertEqual(port.detachments, 0)
        XCTAssertTrue(table.isQueuedAsReady(port))
        XCTAssertEqual(registered.registeredEvents, EPOLLIN.rawValue, "still in one mode")

        table.removed(port, descriptors: &descriptors, poller: poller)
        XCTAssertEqual(port.detachments, 1)
        XCTAssertTrue(table.isEmpty)
        XCTAssertFalse(first.isRegistered)
        XCTAssertFalse(table.isQueuedAsReady(port))
        XCTAssertNil(table.nextReady(in: items))
        XCTAssertEqual(registered.registeredEvents, 0, "out of the poll set at once: its socket may close next")
        XCTAssertNil(table.registration(of: port))
        XCTAssertNil(descriptors.reported(registered.token, events: EPOLLIN.rawValue), "nor can a report carry it")

        table.removed(port, descriptors: &descriptors, poller: poller)
        XCTAssertEqual(port.detachments, 1, "removing a port the table does not hold does nothing")
    }

    func testNextReadyServesOnlyUnpausedPortsOfTheModeInTheOrderTheyBecameReady() throws {
        let a = try FakePort(), b = try FakePort(), c = try FakePort()
        let x = mode("x", holding: a, b)
        let y = mode("y", holding: c)
        for port in [c, a, b] { table.added(port, descriptors: &descriptors) }
        XCTAssertTrue(try entry(of: a, in: x).port === a, "c came first, but is not in x")
        XCTAssertTrue(try entry(of: c, in: y).port === c)
        XCTAssertTrue(table.setPaused(a, true, descriptors: &descriptors))
        XCTAssertTrue(try entry(of: b, in: x).port === b, "a paused port is passed over")
        XCTAssertNil(table.nextReady(in: mode("z")))
    }

    /// The ready queue's order, read by draining it: each port taken as a pass takes it,
    /// and its receive found empty.
    private func drainedOrder(in items: ModeItems) -> [ObjectIdentifier] {
        var order: [ObjectIdentifier] = []
        while let entry = table.nextReady(in: items), order.count < 10 {
            order.append(ObjectIdentifier(entry.port))
            table.willDeliver(from: entry)
            table.didDeliver(from: entry, .empty)
        }
        return order
    }

    func testPortsLeavingTheFrontMiddleOrBackOfTheReadyQueueLeaveTheRestInOrder() throws {
        let ports = try (0..<5).map { _ in try FakePort() }
        let items = ModeItems(mode: LoopMode("x"))
        for port in ports { XCTAssertTrue(items.insert(.port(port))) }
        for port in ports[0..<4] { table.added(port, descriptors: &descriptors) } // queued 0, 1, 2, 3
        table.removed(ports[1], descriptors: &descriptors, poller: poller) // from the middle
        table.removed(ports[3], descriptors: &descriptors, poller: poller) // from the back
        table.added(ports[4], descriptors: &descriptors) // behind 2, the back now
        table.removed(ports[0], descriptors: &descriptors, poller: poller) // from the front
        XCTAssertEqual(drainedOrder(in: items), [ports[2], ports[4]].map(ObjectIdentifier.init))
        table.added(ports[0], descriptors: &descriptors) // into the empty queue
        table.added(ports[1], descriptors: &descriptors)
        XCTAssertEqual(drainedOrder(in: items), [ports[0], ports[1]].map(ObjectIdentifier.init))
        XCTAssertNil(table.nextReady(in: items))
    }

    func testADeliveringPortIsRequeuedAtTheBackUntilAReceiveFindsItDrained() throws {
        let a = try FakePort(), b = try FakePort()
        let items = mode("x", holding: a, b)
        table.added(a, descriptors: &descriptors)
        table.added(b, descriptors: &descriptors)

        let entryA = try entry(of: a, in: items)
        table.willDeliver(from: entryA)
        XCTAssertFalse(table.isQueuedAsReady(a), "off the queue while its handler runs")
        XCTAssertTrue(try entry(of: b, in: items).port === b)
        table.didDeliver(from: entryA, .delivered)
        XCTAssertTrue(table.isQueuedAsReady(a))

        try deliver(from: b, in: items, .dropped)
        XCTAssertTrue(table.isQueuedAsReady(b), "a dropped message may have others behind it")
        try deliver(from: a, in: items, .empty)
        XCTAssertFalse(table.isQueuedAsReady(a), "drained")
        try deliver(from: b, in: items, .delivered)
        try deliver(from: b, in: items, .empty)
        XCTAssertNil(table.nextReady(in: items))
        XCTAssertEqual(a.asked + b.asked, 0, "draining needs no ZMQ_EVENTS: the receive tells")
    }

    func testAfterARunsOneMessageAPortIsAskedAndRequeuedOnlyIfAnotherWaitsUnlessItCannotBeAsked() throws {
        let port = try FakePort()
        let items = mode("x", holding: port)
        table.added(port, descriptors: &descriptors)
        port.waiting = 1
        var entry = try entry(of: port, in: items)
        table.willDeliver(from: entry)
        table.didDeliver(from: entry, .delivered, askingFirst: true)
        XCTAssertTrue(table.isQueuedAsReady(port), "another message waits")
        XCTAssertEqual(port.asked, 1)

        port.waiting = 0
        entry = try self.entry(of: port, in: items)
        table.willDeliver(from: entry)
        table.didDeliver(from: entry, .delivered, askingFirst: true)
        XCTAssertFalse(table.isQueuedAsReady(port), "nothing waits: the next run sleeps at once")
        XCTAssertEqual(port.asked, 2)

        table.removed(port, descriptors: &descriptors, poller: poller)
        port.canAskInsteadOfDraining = false // as a requester's connection
        table.added(port, descriptors: &descriptors)
        entry = try self.entry(of: port, in: items)
        table.willDeliver(from: entry)
        table.didDeliver(from: entry, .delivered, askingFirst: true)
        XCTAssertTrue(table.isQueuedAsReady(port), "not asked: its next receive finds out")
        XCTAssertEqual(port.asked, 2)
    }

    func testAPortRemovedWhileItsMessageIsDeliveredIsNotRequeued() throws {
        let port = try FakePort()
        let items = mode("x", holding: port)
        table.added(port, descriptors: &descriptors)
        let entry = try entry(of: port, in: items)
        table.willDeliver(from: entry)
        table.removed(port, descriptors: &descriptors, poller: poller) // by the handler
        table.didDeliver(from: entry, .delivered)
        XCTAssertFalse(table.isQueuedAsReady(port))
        XCTAssertNil(table.nextReady(in: items))
    }

    func testADescriptorReportForAPortOfTheRunningModeQueuesItWithoutAskingItsSocket() throws {
        let port = try FakePort()
        let items = mode("x", holding: port)
        table.added(port, descriptors: &descriptors)
        let entry = try entry(of: port, in: items)
        try deliver(from: port, in: items, .empty)
        XCTAssertFalse(table.isQueuedAsReady(port))
        table.descriptorReady(entry, runningMode: items)
        XCTAssertTrue(table.isQueuedAsReady(port))
        XCTAssertEqual(port.asked, 0, "its receives will tell whether a message waits")
    }

    func testADescriptorReportForAPortOfAnotherModeAsksItsSocketAndQueuesItOnlyIfAMessageWaits() throws {
        let held = try FakePort(), running = try FakePort()
        let other = mode("other", holding: held)
        let items = mode("running", holding: running)
        table.added(held, descriptors: &descriptors)
        table.added(running, descriptors: &descriptors)
        let heldEntry = try entry(of: held, in: other)
        try deliver(from: held, in: other, .empty)

        table.descriptorReady(heldEntry, runningMode: items)
        XCTAssertEqual(held.asked, 1, "asking consumes the signal, so the held port stops waking the loop")
        XCTAssertFalse(table.isQueuedAsReady(held))

        held.waiting = 1
        table.descriptorReady(heldEntry, runningMode: items)
        XCTAssertEqual(held.asked, 2)
        XCTAssertTrue(table.isQueuedAsReady(held))
        XCTAssertTrue(try entry(of: running, in: items).port === running, "held for its own mode, not delivered here")
        XCTAssertTrue(try entry(of: held, in: other).port === held)

        held.waiting = 0
        table.descriptorReady(heldEntry, runningMode: items)
        XCTAssertFalse(table.isQueuedAsReady(held), "a report finding nothing takes it off the queue")
    }

    func testReportsForAPortThatLeftTheTableOrAPausedPortAreIgnored() throws {
        let gone = try FakePort()
        table.added(gone, descriptors: &descriptors)
        let goneEntry = try entry(of: gone, in: mode("gone", holding: gone))
        table.removed(gone, descriptors: &descriptors, poller: poller)
        gone.waiting = 1
        table.descriptorReady(goneEntry, runningMode: mode("running"))
        XCTAssertEqual(gone.asked, 0)

        let port = try FakePort()
        let other = mode("other", holding: port)
        table.added(port, descriptors: &descriptors)
        let entry = try entry(of: port, in: other)
        try deliver(from: port, in: other, .empty)
        XCTAssertTrue(table.setPaused(port, true, descriptors: &descriptors))
        port.waiting = 1
        table.descriptorReady(entry, runningMode: mode("running"))
        table.descriptorReady(entry, runningMode: other)
        XCTAssertEqual(port.asked, 0)
        XCTAssertFalse(table.isQueuedAsReady(port))
        XCTAssertFalse(table.isQueuedAsReady(gone))
    }

    func testAReportCarriesItsPortSourceAndAReportForARegistrationGoneIsNotTakenForTheNextOneInItsSlot() throws {
        let first = try FakePort()
        table.added(first, descriptors: &descriptors)
        let oldRegistration = try registration(of: first)
        table.removed(first, descriptors: &descriptors, poller: poller)

        let second = try FakePort()
        table.added(second, descriptors: &descriptors)
        let newEntry = try entry(of: second, in: mode("x", holding: second))
        let newRegistration = try registration(of: second)
        XCTAssertEqual(newRegistration.slot, oldRegistration.slot, "the free slot is reused")
        XCTAssertNotEqual(newRegistration.token, oldRegistration.token)
        XCTAssertNil(descriptors.reported(oldRegistration.token, events: EPOLLIN.rawValue), "a report still in flight for the old one")
        XCTAssertTrue(descriptors.reported(newRegistration.token, events: EPOLLIN.rawValue) === newEntry,
                      "the report hands over the port source itself")
        XCTAssertNil(descriptors.reported(Poller.wakeToken &+ 0x7FFF_0000, events: EPOLLIN.rawValue), "a slot never used")
        table.removed(second, descriptors: &descriptors, poller: poller)
    }

    func testAPortRemovedAndAddedAgainGetsANewSourceAndAReportForTheOldOneReachesNeither() throws {
        let port = try FakePort()
        let items = mode("x", holding: port)
        table.added(port, descriptors: &descriptors)
        applyChanges(for: items)
        let oldEntry = try entry(of: port, in: items)
        let oldToken = try registration(of: port).token
        table.removed(port, descriptors: &descriptors, poller: poller)
        table.added(port, descriptors: &descriptors) // its descriptor again, as a handler may within one pass
        let newEntry = try entry(of: port, in: items)
        XCTAssertFalse(newEntry === oldEntry, "a new source, with a new registration")
        XCTAssertNotEqual(try registration(of: port).token, oldToken)
        try deliver(from: port, in: items, .empty)

        XCTAssertNil(descriptors.reported(oldToken, events: EPOLLIN.rawValue), "a report still in flight for the old one")
        table.descriptorReady(oldEntry, runningMode: items) // one that carried the old source anyway
        XCTAssertNil(table.nextReady(in: items), "neither the old source nor the new one is queued by it")
        XCTAssertFalse(table.isQueuedAsReady(port))

        applyChanges(for: items)
        port.signal()
        for entry in try reportedPorts() {
            XCTAssertTrue(entry === newEntry)
            table.descriptorReady(entry, runningMode: items)
        }
        XCTAssertTrue(try entry(of: port, in: items) === newEntry, "the new one's own report queues it")
        table.removed(port, descriptors: &descriptors, poller: poller)
    }

    func testAPortThatLeavesBeforeTheNextSleepIsNotKeptAliveByItsRegistration() throws {
        weak var left: FakePort?
        try {
            let port = try FakePort()
            left = port
            table.added(port, descriptors: &descriptors) // marked to join the poll set at the next sleep
            XCTAssertTrue(table.setPaused(port, true, descriptors: &descriptors))
            table.removed(port, descriptors: &descriptors, poller: poller)
        }()
        XCTAssertNil(left, "its registration, holding its source, left the table with it")
        XCTAssertFalse(descriptors.needsApplying(for: mode("x")), "nothing is left to bring in line")
    }

    func testAPausedPortStaysInItsModesOutOfThePollSetAndIsQueuedWhenResumed() throws {
        let port = try FakePort()
        let items = mode("x", holding: port)
        table.added(port, descriptors: &descriptors)
        let registered = try registration(of: port)
        applyChanges(for: items)
        try deliver(from: port, in: items, .empty)

        XCTAssertTrue(table.setPaused(port, true, descriptors: &descriptors))
        XCTAssertTrue(table.isPaused(port))
        XCTAssertEqual(registered.registeredEvents, EPOLLIN.rawValue, "changes wait for the next sleep")
        applyChanges(for: items)
        XCTAssertEqual(registered.registeredEvents, 0, "out of the poll set: it cannot wake the loop")
        XCTAssertFalse(table.isEmpty)
        XCTAssertEqual(port.detachments, 0, "paused, not removed")
        XCTAssertTrue(table.setPaused(port, true, descriptors: &descriptors), "pausing twice is one pause")
        XCTAssertFalse(descriptors.needsApplying(for: items))

        XCTAssertTrue(table.setPaused(port, false, descriptors: &descriptors))
        XCTAssertFalse(table.isPaused(port))
        XCTAssertTrue(table.isQueuedAsReady(port), "signals that came while it was out of the poll set are lost: its receive finds out")
        XCTAssertEqual(port.asked, 0)
        applyChanges(for: items)
        XCTAssertEqual(registered.registeredEvents, EPOLLIN.rawValue)

        let stranger = try FakePort()
        XCTAssertFalse(table.setPaused(stranger, true, descriptors: &descriptors), "a port in no mode cannot be paused")
        XCTAssertFalse(table.isPaused(stranger))
    }

    func testAfterASendThePortIsQueuedOnlyIfItsSocketSaysAMessageWaits() throws {
        let port = try FakePort(), stranger = try FakePort()
        let items = mode("x", holding: port)
        table.added(port, descriptors: &descriptors)
        try deliver(from: port, in: items, .empty)
        table.updateReadinessAfterSend(on: port)
        XCTAssertEqual(port.asked, 1)
        XCTAssertFalse(table.isQueuedAsReady(port))
        port.waiting = 1
        table.updateReadinessAfterSend(on: port)
        XCTAssertTrue(table.isQueuedAsReady(port))
        table.updateReadinessAfterSend(on: stranger)
        XCTAssertEqual(stranger.asked, 0, "a port the table does not hold is not asked")
    }

    func testAfterASendAQueuedPortWhoseSocketSaysNothingWaitsLeavesTheQueue() throws {
        let port = try FakePort()
        let items = mode("x", holding: port)
        table.added(port, descriptors: &descriptors)
        try deliver(from: port, in: items, .delivered)
        XCTAssertTrue(table.isQueuedAsReady(port), "requeued after a delivery")
        table.updateReadinessAfterSend(on: port)
        XCTAssertEqual(port.asked, 1)
        XCTAssertFalse(table.isQueuedAsReady(port), "ZMQ_EVENTS found it drained, as an empty receive would")
        XCTAssertNil(table.nextReady(in: items), "the next pass sleeps instead of receiving nothing")
    }

    func testAPortThatLeftAfterASendIsNotKeptAliveByTheTable() throws {
        weak var left: FakePort?
        try {
            let port = try FakePort()
            left = port
            table.added(port, descriptors: &descriptors)
            table.updateReadinessAfterSend(on: port) // the table remembers the port it last sent on
            XCTAssertEqual(port.asked, 1)
            table.removed(port, descriptors: &descriptors, poller: poller)
        }()
        XCTAssertNil(left, "the port left the loop: the table keeps nothing of it")
    }

    func testASendAfterThePortLeftAndCameBackQueuesItsNewSource() throws {
        let port = try FakePort()
        let items = mode("x", holding: port)
        table.added(port, descriptors: &descriptors)
        try deliver(from: port, in: items, .empty)
        table.updateReadinessAfterSend(on: port)
        table.removed(port, descriptors: &descriptors, poller: poller)
        table.added(port, descriptors: &descriptors)
        try deliver(from: port, in: items, .empty)
        port.waiting = 1
        table.updateReadinessAfterSend(on: port)
        XCTAssertTrue(table.isQueuedAsReady(port), "the port's entry now, not the one it had before it left")
        XCTAssertNotNil(table.nextReady(in: items))
        table.removed(port, descriptors: &descriptors, poller: poller)
        table.updateReadinessAfterSend(on: port)
        XCTAssertEqual(port.asked, 2, "a port the table no longer holds is not asked")
    }

    func testAPortWhoseDescriptorFiresInThePollSetIsQueuedByTheWait() throws {
        let port = try FakePort(), quiet = try FakePort()
        let items = mode("x", holding: port, quiet)
        table.added(port, descriptors: &descriptors)
        table.added(quiet, descriptors: &descriptors)
        applyChanges(for: items)
        try deliver(from: port, in: items, .empty)
        try deliver(from: quiet, in: items, .empty)

        port.signal()
        for entry in try reportedPorts() { table.descriptorReady(entry, runningMode: items) }
        XCTAssertTrue(table.isQueuedAsReady(port))
        XCTAssertFalse(table.isQueuedAsReady(quiet))
        table.removed(port, descriptors: &descriptors, poller: poller)
        table.removed(quiet, descriptors: &descriptors, poller: poller)
    }
}
