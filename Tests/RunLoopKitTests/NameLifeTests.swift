import Foundation
import Glibc
import RunLoopSystem
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// A named port's life page (`NameLife`, docs/reliability.md, "A peer is gone"): the robust
/// lock its owner thread holds, which the kernel releases marked owner-died the moment that
/// thread ends holding it, and the withdrawn mark its owner sets on giving the name back.
/// Here the owner is this very process, simulated: its pidfd never turns readable and its
/// lock file stays, so only the life page can tell a `PortLossSource` anything.
final class NameLifeTests: XCTestCase {
    /// A name held by this process (its lock taken and announced) whose life page a thread
    /// of its own made, and holds until `endHolderThread`.
    private final class SimulatedOwner: @unchecked Sendable {
        let port: RemotePort
        let nameLock: NameLock
        private(set) var life: NameLife?
        private let made = DispatchSemaphore(value: 0), go = DispatchSemaphore(value: 0)
        private let holder: NativeThread

        init() throws {
            let name = "life-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            let directory = try RuntimeDirectory.path()
            nameLock = try NameLock(name: name, directory: directory)
            nameLock.announceOwner()
            port = RemotePort(PortAddress(unchecked: "ipc://\(directory)/\(name).sock"))
            let box = LifeBox()
            holder = try NativeThread.start(name: "life-holder") { [made, go] in
                box.life = try? NameLife(name: name, directory: directory)
                made.signal()
                go.wait() // then ends, holding the page's lock unless it was given back
            }
            made.wait()
            life = box.life
        }

        /// Lets the holder thread end: the kernel releases its robust lock, marked owner-died.
        func endHolderThread() {
            go.signal()
            holder.join()
        }

        deinit {
            life?.release()
            nameLock.release()
        }
    }

    private final class LifeBox: @unchecked Sendable {
        var life: NameLife? // written by the holder thread before `made`, read after
    }

    func testAnOwnerThreadThatEndsHoldingItsLifeLockIsReportedDeadWhileItsProcessLives() throws {
        let owner = try SimulatedOwner()
        XCTAssertNotNil(owner.life)
        let losses = LockedValue<[PortLoss]>([])
        let source = try PortLossSource(watching: owner.port) { loss in losses.withLock { $0.append(loss) } }
        ThreadRunLoop.current.add(source, to: .default)
        owner.endHolderThread()
        XCTAssertTrue(runCurrentLoop { !losses.withLock { $0.isEmpty } }, "the holder's end was not seen")
        XCTAssertEqual(losses.withLock { $0 }, [.ownerDied])
        XCTAssertFalse(source.isValid)
    }

    func testAPageMarkedWithdrawnIsReportedInvalidatedThoughItsLockFileStays() throws {
        let owner = try SimulatedOwner()
        defer { owner.endHolderThread() }
        let losses = LockedValue<[PortLoss]>([])
        let source = try PortLossSource(watching: owner.port) { loss in losses.withLock { $0.append(loss) } }
        ThreadRunLoop.current.add(source, to: .default)
        owner.life?.withdraw()
        XCTAssertTrue(runCurrentLoop { !losses.withLock { $0.isEmpty } }, "the withdrawal was not seen")
        XCTAssertEqual(losses.withLock { $0 }, [.portInvalidated])
    }

    func testAWatchOfAnOwnerAlreadyDeadOnItsPageFiresAtOnce() throws {
        let owner = try SimulatedOwner()
        owner.endHolderThread()
        let losses = LockedValue<[PortLoss]>([])
        let source = try PortLossSource(watching: owner.port) { loss in losses.withLock { $0.append(loss) } }
        ThreadRunLoop.current.add(source, to: .default)
        XCTAssertTrue(runCurrentLoop { !losses.withLock { $0.isEmpty } }, "the dead holder was not seen")
        XCTAssertEqual(losses.withLock { $0 }, [.ownerDied])
    }

    func testEveryWatcherOfOnePageIsToldThoughTheKernelWakesOnlyOne() throws {
        // 130 watches: more than one thread's worth (127), each its own mapping of the page.
        let owner = try SimulatedOwner()
        let fired = LockedValue(0)
        var sources: [PortLossSource] = []
        for _ in 0..<130 {
            let source = try PortLossSource(watching: owner.port) { loss in
                XCTAssertEqual(loss, .ownerDied)
                fired.withLock { $0 += 1 }
            }
            ThreadRunLoop.current.add(source, to: .default)
            sources.append(source)
        }
        XCTAssertEqual(LifeWaiter.shared._threads, 2)
        owner.endHolderThread()
        XCTAssertTrue(runCurrentLoop { fired.withLock { $0 } == 130 }, "\(fired.withLock { $0 }) of 130 told")
        XCTAssertTrue(sources.allSatisfy { !$0.isValid })
        XCTAssertTrue(LifeWaiter.shared._waitUntilNoThread(before: .after(.seconds(20))), "a life waiter outlived its watches")
    }

    func testTheLifeWaitersThreadEndsWithItsLastWatchInvalidated() throws {
        let owner = try SimulatedOwner()
        defer { owner.endHolderThread() }
        let sources = try (0..<3).map { _ in try PortLossSource(watching: owner.port) { _ in XCTFail("fired") } }
        XCTAssertEqual(LifeWaiter.shared._threads, 1)
        for source in sources { source.invalidate() }
        XCTAssertTrue(LifeWaiter.shared._waitUntilNoThread(before: .after(.seconds(20))), "the life waiter outlived its watches")
    }

    func testAChildForkedFromAnOwnerLeavesItsParentsPageLive() throws {
        let owner = try SimulatedOwner()
        defer { owner.endHolderThread() }
        let child = fork()
        if child == 0 {
            // The child's copy of the page goes; the page itself is the parent's.
            owner.life?.release()
            _exit(0)
        }
        var status: Int32 = 0
        XCTAssertEqual(waitpid(child, &status, 0), child)
        let life = try XCTUnwrap(owner.life)
        let page = try XCTUnwrap(NameLife.watch(path: life.path, ownerPID: getpid()))
        defer { page.unmap() }
        guard case .live(let word) = page.reading else { return XCTFail("the child's release withdrew its parent's page") }
        XCTAssertNotEqual(word & Kernel.robustThreadMask, 0)
    }
}
