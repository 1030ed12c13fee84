import Foundation
import Glibc
import RunLoopSystem
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// A port name watched as a loop source (`PortNameWatch`, `docs/reliability.md`, "A peer is
/// gone"): the first event says the name's state, then `.appeared` and `.vanished` strictly
/// alternate, across an invalidation, an owner's exit, its SIGKILL and a takeover by another
/// process, in the watch's modes only; and the watch's descriptors go with it.
final class PortNameWatchTests: XCTestCase {
    private static let ownerVariable = "RUNLOOPKIT_NAME_WATCH_OWNER"

    /// In the owner process (`startOwner`): SIGUSR1 invalidates the port ("invalidated"),
    /// or registers the name again if it is invalid ("registered"); SIGUSR2 exits normally
    /// (`exit`, which gives the name back).
    override func setUp() {
        super.setUp()
        serveNameOwnerInChild(PortNameWatchTests.ownerVariable) { name, first in
            var port = first
            let loop = ThreadRunLoop.current
            let toggle = try SignalSource(.user1) { _ in
                if port.isValid {
                    port.invalidate()
                    print("invalidated")
                } else if let again = try? LocalPort(name: name) {
                    port = again
                    loop.add(again, to: .default)
                    print("registered")
                }
                fflush(nil)
            }
            return [toggle, try SignalSource(.user2) { _ in exit(0) }]
        }
    }

    private func uniqueName(_ label: String) -> String {
        "watch-\(label)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    }

    /// Starts an owner of `name` in another process (see `startNameOwner`).
    private func startOwner(of name: String, file: StaticString = #filePath, line: UInt = #line) throws -> SpawnedProcess {
        try startNameOwner(name, variable: PortNameWatchTests.ownerVariable,
                           test: "testTheFirstEventIsAppearedWhenALivePortHoldsTheName", file: file, line: line)
    }

    private func address(of name: String) throws -> RemotePort {
        RemotePort(PortAddress(unchecked: "ipc://\(try RuntimeDirectory.path())/\(name).sock"))
    }

    /// Runs this thread's loop until `events` holds `count` events (20 s at most).
    private func runUntil(_ events: LockedValue<[PortNameEvent]>, count: Int, in mode: LoopMode = .default,
                          file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(runCurrentLoop(in: mode) { events.withLock { $0.count >= count } },
                      "waited for \(count) events, got \(events.withLock { $0 })", file: file, line: line)
    }

    /// A little more of the loop, to see that nothing more is reported.
    private func runALittleMore(in mode: LoopMode = .default) {
        _ = ThreadRunLoop.current.run(mode: mode, timeout: .milliseconds(50), returnAfterSourceHandled: false)
    }

    private func watch(_ name: String, into events: LockedValue<[PortNameEvent]>,
                       in mode: LoopMode = .default) throws -> PortNameWatch {
        let watch = try PortNameWatch(name: name) { event in events.withLock { $0.append(event) } }
        ThreadRunLoop.current.add(watch, to: mode)
        return watch
    }

    // MARK: - The first event

    func testTheFirstEventIsVanishedWhenNoLivePortHoldsTheName() throws {
        // A name never registered, and a dead owner's leftovers: a lock file nobody holds,
        // naming a live process (this one), and a socket file.
        let never = uniqueName("never")
        let dead = uniqueName("dead")
        let directory = try RuntimeDirectory.path()
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(directory)/\(dead).lock", contents: Data("\(getpid())\n".utf8)))
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(directory)/\(dead).sock", contents: Data()))
        try removeNameFilesAtTearDown(of: dead)
        let neverEvents = LockedValue<[PortNameEvent]>([]), deadEvents = LockedValue<[PortNameEvent]>([])
        let watches = [try watch(never, into: neverEvents), try watch(dead, into: deadEvents)]
        runUntil(neverEvents, count: 1)
        runUntil(deadEvents, count: 1)
        runALittleMore()
        XCTAssertEqual(neverEvents.withLock { $0 }, [.vanished])
        XCTAssertEqual(deadEvents.withLock { $0 }, [.vanished])
        watches.forEach { $0.invalidate() }
    }

    func testTheFirstEventIsAppearedWhenALivePortHoldsTheName() throws {
        let name = uniqueName("live")
        let owner = try startOwner(of: name)
        let events = LockedValue<[PortNameEvent]>([])
        let watch = try watch(name, into: events)
        runUntil(events, count: 1)
        runALittleMore()
        XCTAssertEqual(events.withLock { $0 }, [.appeared(try address(of: name))])
        XCTAssertEqual(try RemotePort(named: name).address, try address(of: name).address)
        watch.invalidate()
        XCTAssertEqual(kill(owner.pid, SIGKILL), 0)
        XCTAssertNotNil(owner.waitForExit())
    }

    func testANameBeingRegisteredAppearsOnlyWithItsLastStep() throws {
        // A registration stopped half-way: the name's lock taken, a socket file there (here a
        // dead owner's, which a listening socket would replace), the port not yet published.
        let name = uniqueName("halfway")
        let events = LockedValue<[PortNameEvent]>([])
        let reserved = try PortDirectory.shared.reserve(name)
        XCTAssertEqual(mknod(reserved.socketPath, S_IFSOCK | 0o600, 0), 0)
        let watch = try watch(name, into: events)
        runUntil(events, count: 1)
        runALittleMore()
        XCTAssertEqual(events.withLock { $0 }, [.vanished], "appeared before the owner's last step")
        PortDirectory.shared.publish(reserved, inProcess: PortAddress(unchecked: "inproc://watch-halfway"))
        runUntil(events, count: 2)
        XCTAssertEqual(events.withLock { $0 }, [.vanished, .appeared(try address(of: name))])
        PortDirectory.shared.withdraw(reserved)
        runUntil(events, count: 3)
        XCTAssertEqual(events.withLock { $0 }.last, .vanished)
        watch.invalidate()
    }

    // MARK: - Alternation

    func testEventsAlternateAcrossInvalidationAndRegistrationAgain() throws {
        let name = uniqueName("toggle")
        let events = LockedValue<[PortNameEvent]>([])
        let watch = try watch(name, into: events)
        runUntil(events, count: 1) // vanished: no owner yet
        let owner = try startOwner(of: name)
        runUntil(events, count: 2)
        XCTAssertEqual(kill(owner.pid, SIGUSR1), 0)
        runUntil(events, count: 3)
        XCTAssertTrue(owner.waitForLine("invalidated"))
        XCTAssertEqual(kill(owner.pid, SIGUSR1), 0)
        runUntil(events, count: 4)
        XCTAssertTrue(owner.waitForLine("registered"))
        XCTAssertEqual(kill(owner.pid, SIGUSR1), 0)
        runUntil(events, count: 5)
        runALittleMore()
        let port = try address(of: name)
        XCTAssertEqual(events.withLock { $0 }, [.vanished, .appeared(port), .vanished, .appeared(port), .vanished])
        watch.invalidate()
        XCTAssertEqual(kill(owner.pid, SIGKILL), 0)
        XCTAssertNotNil(owner.waitForExit())
    }

    func testANameGivenBackAndTakenAgainBeforeTheLoopLooksIsVanishedThenAppeared() throws {
        // In this process, with no run of the loop in between: the watch sees the name held
        // both times it looks, and still reports the change of owner.
        let name = uniqueName("quick")
        let events = LockedValue<[PortNameEvent]>([])
        let watch = try watch(name, into: events)
        var port: LocalPort? = try LocalPort(name: name)
        runUntil(events, count: 1)
        for _ in 0..<3 {
            port?.invalidate()
            port = nil
            port = try LocalPort(name: name)
        }
        runUntil(events, count: 3)
        runALittleMore()
        let remote = try address(of: name)
        XCTAssertEqual(events.withLock { $0 }, [.appeared(remote), .vanished, .appeared(remote)])
        port?.invalidate()
        runUntil(events, count: 4)
        XCTAssertEqual(events.withLock { $0 }.last, .vanished)
        watch.invalidate()
    }

    func testAnOwnerThatExitsVanishesOnce() throws {
        let name = uniqueName("exit")
        let owner = try startOwner(of: name)
        let events = LockedValue<[PortNameEvent]>([])
        let watch = try watch(name, into: events)
        runUntil(events, count: 1)
        XCTAssertEqual(kill(owner.pid, SIGUSR2), 0)
        runUntil(events, count: 2)
        XCTAssertEqual(owner.waitForExit(), .exited(0))
        runALittleMore()
        XCTAssertEqual(events.withLock { $0 }, [.appeared(try address(of: name)), .vanished])
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(try RuntimeDirectory.path())/\(name).lock"),
                       "a normal exit gives the name back")
        watch.invalidate()
    }

    /// Starts an owner of `name`, watches the name until it has appeared, and kills the owner.
    private func watchKilledOwner(of name: String) throws
        -> (owner: SpawnedProcess, watch: PortNameWatch, events: LockedValue<[PortNameEvent]>) {
        let owner = try startOwner(of: name)
        let events = LockedValue<[PortNameEvent]>([])
        let watch = try watch(name, into: events)
        runUntil(events, count: 1)
        XCTAssertEqual(kill(owner.pid, SIGKILL), 0)
        return (owner, watch, events)
    }

    /// After `second` took `name` from a killed owner: the watch reported appeared, vanished,
    /// appeared, and nothing more. Ends the watch and `second`.
    private func expectTakenOver(_ name: String, by second: SpawnedProcess, watch: PortNameWatch,
                                 events: LockedValue<[PortNameEvent]>) throws {
        runUntil(events, count: 3)
        runALittleMore()
        let port = try address(of: name)
        XCTAssertEqual(events.withLock { $0 }, [.appeared(port), .vanished, .appeared(port)])
        watch.invalidate()
        XCTAssertEqual(kill(second.pid, SIGKILL), 0)
        XCTAssertNotNil(second.waitForExit())
    }

    func testAnOwnerKilledBySIGKILLVanishesAndAnotherProcessTakingTheNameAppears() throws {
        let name = uniqueName("killed")
        let (first, watch, events) = try watchKilledOwner(of: name)
        runUntil(events, count: 2)
        XCTAssertNotNil(first.waitForExit())
        // The dead owner's files are still there: only its pidfd told.
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(try RuntimeDirectory.path())/\(name).lock"))
        let second = try startOwner(of: name)
        try expectTakenOver(name, by: second, watch: watch, events: events)
    }

    func testATakeoverByAnotherProcessBeforeTheLoopLooksIsVanishedThenAppeared() throws {
        // The first owner is killed and a second process takes the name while the watching
        // loop does not run: both are seen when it runs, the death first.
        let name = uniqueName("takeover")
        let (first, watch, events) = try watchKilledOwner(of: name)
        XCTAssertNotNil(first.waitForExit())
        let second = try startOwner(of: name)
        XCTAssertEqual(events.withLock { $0.count }, 1, "the loop did not run meanwhile")
        try expectTakenOver(name, by: second, watch: watch, events: events)
    }

    // MARK: - Modes, descriptors, names

    func testAWatchReportsOnlyInTheModesItWasAddedTo() throws {
        let name = uniqueName("modes")
        let other = LoopMode("name-watch-other")
        let events = LockedValue<[PortNameEvent]>([])
        let watch = try watch(name, into: events, in: other)
        XCTAssertTrue(ThreadRunLoop.current.contains(watch, in: other))
        XCTAssertFalse(ThreadRunLoop.current.contains(watch, in: .default))
        let port = try LocalPort(name: name)
        runALittleMore()
        XCTAssertEqual(events.withLock { $0 }, [], "reported in a mode it is not in")
        runUntil(events, count: 1, in: other)
        XCTAssertEqual(events.withLock { $0 }, [.appeared(try address(of: name))])
        port.invalidate()
        runALittleMore()
        XCTAssertEqual(events.withLock { $0 }.count, 1, "reported in a mode it is not in")
        runUntil(events, count: 2, in: other)
        XCTAssertEqual(events.withLock { $0 }.last, .vanished)
        watch.invalidate()
    }

    func testAnInvalidatedOrRemovedAndReleasedWatchLeavesNoDescriptor() throws {
        let name = uniqueName("descriptors")
        let owner = try startOwner(of: name)
        let loop = ThreadRunLoop.current
        // The loop's poll set first (made with its first descriptor source), so that only the
        // watches' descriptors are counted.
        let warmUp = DescriptorSource(descriptor: try Kernel.eventDescriptor(), watching: .readable, ownership: .owned) { _ in }
        loop.add(warmUp, to: .default)
        _ = loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: false)
        warmUp.invalidate()
        _ = loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: false)
        let before = descriptorInventory()
        let events = LockedValue<[PortNameEvent]>([])
        let invalidated = try watch(name, into: events)
        runUntil(events, count: 1)
        XCTAssertEqual(events.withLock { $0 }, [.appeared(try address(of: name))])
        // Its epoll instance, its inotify descriptor and the owner's pidfd.
        let watching = descriptorInventory()
        XCTAssertEqual(watching.count, before.count + 3, describeNewDescriptors(before: before, after: watching))
        invalidated.invalidate()
        _ = loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: false)
        XCTAssertEqual(descriptorInventory().count, before.count, describeNewDescriptors(before: before, after: descriptorInventory()))
        XCTAssertFalse(invalidated.isValid)
        // Removed from its mode and released: the loop held it last, and its descriptors go with it.
        do {
            let removed = try watch(name, into: events)
            runUntil(events, count: 2)
            loop.remove(removed, from: .default)
        }
        _ = loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: false)
        XCTAssertEqual(descriptorInventory().count, before.count, describeNewDescriptors(before: before, after: descriptorInventory()))
        // And a watch never added, released.
        do { _ = try PortNameWatch(name: name) { _ in XCTFail("reported on no loop") } }
        XCTAssertEqual(descriptorInventory().count, before.count, describeNewDescriptors(before: before, after: descriptorInventory()))
        XCTAssertEqual(kill(owner.pid, SIGKILL), 0)
        XCTAssertNotNil(owner.waitForExit())
    }

    func testAnIdleWatchSleepsInThePollSet() throws {
        // Watching a held name (its owner's pidfd in the set) while nothing happens to it:
        // the loop sleeps. Other processes' names in the shared directory may wake it a few
        // times; a descriptor left ready would wake it thousands.
        let name = uniqueName("idle")
        let loop = ThreadRunLoop.current
        let port = try LocalPort(name: name)
        let events = LockedValue<[PortNameEvent]>([])
        let watch = try watch(name, into: events)
        runUntil(events, count: 1)
        var wakeUps = 0
        let observer = LoopObserver(activities: .afterWaiting) { _, _ in wakeUps += 1 }
        loop.add(observer, to: .default)
        let before = threadCPUTime()
        _ = loop.run(mode: .default, timeout: .milliseconds(300), returnAfterSourceHandled: false)
        let spent = threadCPUTime() - before
        observer.invalidate()
        XCTAssertLessThanOrEqual(wakeUps, 50, "the watch's descriptors do not keep waking the loop")
        XCTAssertLessThan(spent, .milliseconds(20), "no spinning while the name stays held")
        XCTAssertEqual(events.withLock { $0 }, [.appeared(try address(of: name))])
        watch.invalidate()
        port.invalidate()
    }

    func testANameNoPortCanHaveCannotBeWatched() {
        XCTAssertThrowsError(try PortNameWatch(name: "../escape") { _ in }) { error in
            guard case .invalidName = error as? PortError else { return XCTFail("\(error)") }
        }
    }
}
