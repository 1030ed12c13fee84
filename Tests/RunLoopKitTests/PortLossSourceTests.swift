import Foundation
import Glibc
import RunLoopSystem
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// A named port's owner in another process, watched as a loop source (`PortLossSource`,
/// `docs/reliability.md`, "A peer is gone"): its death and its invalidation each fire the
/// handler once, with why; a source invalidated first never fires and keeps no descriptor;
/// a port already gone cannot be watched; and the source fires only in its modes.
final class PortLossSourceTests: XCTestCase {
    private static let ownerVariable = "RUNLOOPKIT_PORT_LOSS_OWNER"

    /// In the owner process (`startOwner`): SIGUSR1 invalidates the port ("invalidated").
    override func setUp() {
        super.setUp()
        serveNameOwnerInChild(PortLossSourceTests.ownerVariable) { name, port in
            if name.hasPrefix("loss-heavy-") {
                // 64 MiB written in 4 KiB pages (no huge pages, which unmap at once): some
                // milliseconds for the kernel to unmap once the owner is killed.
                let bytes = 64 << 20
                let memory = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)!
                _ = madvise(memory, bytes, 15) // MADV_NOHUGEPAGE
                memset(memory, 1, bytes)
            }
            return [try SignalSource(.user1) { _ in
                port.invalidate()
                print("invalidated")
                fflush(nil)
            }]
        }
    }

    /// Starts an owner of a fresh name in another process (see `startNameOwner`) and returns
    /// it once its port is registered, with the port as another process sees it.
    private func startOwner(heavy: Bool = false, file: StaticString = #filePath, line: UInt = #line) throws -> (SpawnedProcess, RemotePort) {
        let name = "loss-\(heavy ? "heavy-" : "")\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let owner = try startNameOwner(name, variable: PortLossSourceTests.ownerVariable,
                                       test: "testAPortItsOwnerInvalidatesFiresWithPortInvalidated", file: file, line: line)
        return (owner, try RemotePort(named: name))
    }

    func testAWatchedPortsOwnerKilledBySIGKILLFiresOnceWithOwnerDied() throws {
        let (owner, port) = try startOwner()
        let losses = LockedValue<[PortLoss]>([])
        let source = try PortLossSource(watching: port) { loss in losses.withLock { $0.append(loss) } }
        XCTAssertEqual(source.ownerPID, owner.pid)
        ThreadRunLoop.current.add(source, to: .default)
        XCTAssertEqual(kill(owner.pid, SIGKILL), 0)
        XCTAssertTrue(runCurrentLoop { !losses.withLock { $0.isEmpty } }, "the owner's death was not seen")
        XCTAssertNotNil(owner.waitForExit())
        // Once: more passes of the loop, with the death long seen, call nothing more.
        _ = ThreadRunLoop.current.run(mode: .default, timeout: .milliseconds(50), returnAfterSourceHandled: false)
        XCTAssertEqual(losses.withLock { $0 }, [.ownerDied])
        XCTAssertFalse(source.isValid)
        XCTAssertFalse(ThreadRunLoop.current.contains(source, in: .default))
    }

    func testAHandlerTakesOverTheNameOfAnOwnerItHeardDie() throws {
        // Heard on the life page, the death comes before the kernel has ended the owner
        // (here one with 64 MiB to unmap) and released its name's lock: taking the name
        // over there must still work.
        let successor = LockedValue<LocalPort?>(nil)
        let (outcome, _) = try outcomeOfAHandlerAtAHeavyOwnersDeath { loss, name in
            let port = try LocalPort(name: name)
            successor.withLock { $0 = port }
            return "\(loss): taken over"
        }
        XCTAssertEqual(outcome, "its owner process died: taken over")
        successor.withLock { $0?.invalidate() }
    }

    func testANameLookedUpInTheHandlerOfItsOwnersDeathIsNotFound() throws {
        // The dying owner (64 MiB to unmap) still holds the name's lock when the handler
        // runs: its life page, not the lock, says whether it lives.
        let (outcome, name) = try outcomeOfAHandlerAtAHeavyOwnersDeath { _, name in
            _ = try RemotePort(named: name)
            return "found"
        }
        XCTAssertEqual(outcome, "\(PortError.nameNotFound(name))")
    }

    /// Runs `body` in the handler of a watch of a heavy owner (64 MiB to unmap) killed by
    /// `SIGKILL`, with the loss and the port's name; returns what it returned, or the error
    /// it threw, described (nil if the death was not seen), and the name.
    private func outcomeOfAHandlerAtAHeavyOwnersDeath(_ body: @escaping (PortLoss, String) throws -> String,
                                                       file: StaticString = #filePath,
                                                       line: UInt = #line) throws -> (String?, name: String) {
        let (owner, port) = try startOwner(heavy: true, file: file, line: line)
        let name = Self.name(of: port)
        let outcome = LockedValue<String?>(nil)
        let source = try PortLossSource(watching: port) { loss in
            let said: String
            do { said = try body(loss, name) } catch { said = "\(error)" }
            outcome.withLock { $0 = said }
        }
        ThreadRunLoop.current.add(source, to: .default)
        XCTAssertEqual(kill(owner.pid, SIGKILL), 0, file: file, line: line)
        XCTAssertTrue(runCurrentLoop { outcome.withLock { $0 } != nil }, "the owner's death was not seen", file: file, line: line)
        XCTAssertNotNil(owner.waitForExit(), file: file, line: line)
        return (outcome.withLock { $0 }, name)
    }

    /// The name of a named port, from its ipc address (`ipc://<dir>/<name>.sock`).
    private static func name(of port: RemotePort) -> String {
        String(port.address.rawValue.split(separator: "/").last!.dropLast(".sock".count))
    }

    func testAPortItsOwnerInvalidatesFiresWithPortInvalidated() throws {
        let (owner, port) = try startOwner()
        let losses = LockedValue<[PortLoss]>([])
        let source = try PortLossSource(watching: port) { loss in losses.withLock { $0.append(loss) } }
        ThreadRunLoop.current.add(source, to: .default)
        XCTAssertEqual(kill(owner.pid, SIGUSR1), 0)
        XCTAssertTrue(runCurrentLoop { !losses.withLock { $0.isEmpty } }, "the invalidation was not seen")
        XCTAssertTrue(owner.waitForLine("invalidated"))
        XCTAssertEqual(losses.withLock { $0 }, [.portInvalidated])
        XCTAssertFalse(source.isValid)
        // The owner still lives: its death later is no second loss.
        XCTAssertEqual(kill(owner.pid, SIGKILL), 0)
        XCTAssertNotNil(owner.waitForExit())
        _ = ThreadRunLoop.current.run(mode: .default, timeout: .milliseconds(50), returnAfterSourceHandled: false)
        XCTAssertEqual(losses.withLock { $0 }, [.portInvalidated])
    }

    /// `Tests/peers/life_watcher.py`, written from docs/wire-format.md ("Where named ports
    /// live") with Python's standard library alone, on the owner's life page.
    private func lifeWatcher(of port: RemotePort, ownerPID: pid_t) throws -> SpawnedProcess {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("peers/life_watcher.py").path
        return try SpawnedProcess(["/usr/bin/python3", script, "--runtime-dir", try RuntimeDirectory.path(),
                                   "--name", Self.name(of: port), "--pid", "\(ownerPID)"])
    }

    func testAWatcherWrittenFromTheWireFormatSeesTheOwnersDeathOnItsLifePage() throws {
        try assertTheLifeWatcherSays("died", whenTheOwnerGets: SIGKILL)
    }

    func testAWatcherWrittenFromTheWireFormatSeesTheOwnerGiveItsPortBack() throws {
        try assertTheLifeWatcherSays("given back", whenTheOwnerGets: SIGUSR1) // the owner invalidates its port
    }

    private func assertTheLifeWatcherSays(_ line: String, whenTheOwnerGets signal: Int32,
                                          file: StaticString = #filePath, line number: UInt = #line) throws {
        let (owner, port) = try startOwner(file: file, line: number)
        let watcher = try lifeWatcher(of: port, ownerPID: owner.pid)
        XCTAssertTrue(watcher.waitForLine("ready"), watcher.stdout + watcher.stderr, file: file, line: number)
        XCTAssertEqual(kill(owner.pid, signal), 0, file: file, line: number)
        XCTAssertTrue(watcher.waitForLine(line), watcher.stdout + watcher.stderr, file: file, line: number)
        XCTAssertEqual(watcher.waitForExit(), .exited(0), file: file, line: number)
        kill(owner.pid, SIGKILL) // dead already, or still serving after its invalidation
        XCTAssertNotNil(owner.waitForExit(), file: file, line: number)
    }

    func testAWatchInvalidatedBeforeItFiresNeverFiresAndLeavesNoDescriptor() throws {
        let (owner, port) = try startOwner()
        let loop = ThreadRunLoop.current
        // The loop's poll set first (made with its first descriptor source), so that only the
        // watches' descriptors are counted.
        let warmUp = DescriptorSource(descriptor: try Kernel.eventDescriptor(), watching: .readable, ownership: .owned) { _ in }
        loop.add(warmUp, to: .default)
        _ = loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: false)
        warmUp.invalidate()
        _ = loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: false)
        let before = descriptorInventory()
        let fired = LockedValue(false)
        let onLoop = try PortLossSource(watching: port) { _ in fired.withLock { $0 = true } }
        let onNoLoop = try PortLossSource(watching: port) { _ in fired.withLock { $0 = true } }
        loop.add(onLoop, to: .default)
        _ = loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: false)
        let watching = descriptorInventory()
        XCTAssertEqual(watching.count, before.count + 2, describeNewDescriptors(before: before, after: watching))
        onLoop.invalidate()
        onNoLoop.invalidate()
        XCTAssertEqual(kill(owner.pid, SIGKILL), 0)
        XCTAssertNotNil(owner.waitForExit())
        _ = loop.run(mode: .default, timeout: .milliseconds(50), returnAfterSourceHandled: false)
        XCTAssertFalse(fired.withLock { $0 })
        // Pipes aside: those of the owners' outputs close as the owners end.
        let after = descriptorInventory().filter { $0.value != "pipe" }, kept = before.filter { $0.value != "pipe" }
        XCTAssertEqual(after.count, kept.count, describeNewDescriptors(before: kept, after: after))
    }

    func testWatchingAPortWhoseOwnerIsAlreadyGoneFailsWithRemoteInvalid() throws {
        let (owner, port) = try startOwner()
        XCTAssertEqual(kill(owner.pid, SIGKILL), 0)
        XCTAssertNotNil(owner.waitForExit())
        let before = descriptorInventory()
        XCTAssertThrowsError(try PortLossSource(watching: port) { _ in XCTFail("fired") }) { error in
            XCTAssertEqual(error as? PortError, .remoteInvalid(port.address))
        }
        XCTAssertEqual(descriptorInventory().count, before.count, "a failed watch keeps no descriptor")
    }

    func testALockFileNoLiveProcessHoldsIsNoProofOfThePidItNames() throws {
        // A dead owner's lock file whose pid now belongs to a live process (here, this one):
        // the pid alone must not make that process the port's owner.
        let name = "loss-stale-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let directory = try RuntimeDirectory.path()
        let lockPath = "\(directory)/\(name).lock"
        XCTAssertTrue(FileManager.default.createFile(atPath: lockPath, contents: Data("\(getpid())\n".utf8)))
        defer { try? FileManager.default.removeItem(atPath: lockPath) }
        let port = RemotePort(PortAddress(unchecked: "ipc://\(directory)/\(name).sock"))
        XCTAssertThrowsError(try PortLossSource(watching: port) { _ in XCTFail("fired") }) { error in
            XCTAssertEqual(error as? PortError, .remoteInvalid(port.address))
        }
    }

    func testAnInProcessAddressCannotBeWatched() throws {
        let local = try LocalPort()
        defer { local.invalidate() }
        XCTAssertThrowsError(try PortLossSource(watching: local.remote) { _ in }) { error in
            guard case .invalidAddress = error as? PortError else { return XCTFail("\(error)") }
        }
    }

    func testALossFiresOnlyInTheModesTheSourceWasAddedTo() throws {
        let (owner, port) = try startOwner()
        let other = LoopMode("port-loss-other")
        let losses = LockedValue<[PortLoss]>([])
        let source = try PortLossSource(watching: port) { loss in losses.withLock { $0.append(loss) } }
        ThreadRunLoop.current.add(source, to: other)
        XCTAssertTrue(ThreadRunLoop.current.contains(source, in: other))
        XCTAssertFalse(ThreadRunLoop.current.contains(source, in: .default))
        XCTAssertEqual(kill(owner.pid, SIGKILL), 0)
        XCTAssertNotNil(owner.waitForExit()) // reaped: its pidfd is readable from now on
        _ = ThreadRunLoop.current.run(mode: .default, timeout: .milliseconds(50), returnAfterSourceHandled: false)
        XCTAssertEqual(losses.withLock { $0 }, [], "fired in a mode it is not in")
        XCTAssertTrue(runCurrentLoop(in: other) { !losses.withLock { $0.isEmpty } })
        XCTAssertEqual(losses.withLock { $0 }, [.ownerDied])
    }
}
