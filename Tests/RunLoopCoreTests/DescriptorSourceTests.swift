import Dispatch
import Foundation
import Glibc
@testable import RunLoopCore
import RunLoopTestSupport
import XCTest

/// Descriptor sources: any descriptor watched for readable/writable, level-triggered, in modes.
final class DescriptorSourceTests: XCTestCase {
    private var loop: ThreadRunLoop!
    private let mode = LoopMode("DescriptorSourceTests")
    private var pipes: [Int32] = []

    override func setUp() {
        super.setUp()
        loop = ThreadRunLoop.current
    }

    override func tearDown() {
        for fd in pipes { close(fd) } // EBADF for those a test closed: fine
        pipes = []
        loop = nil
        super.tearDown()
    }

    /// A non-blocking pipe: (read end, write end), closed at tearDown.
    private func makePipe() -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(nonBlockingPipe(&fds), 0)
        pipes += fds
        return (fds[0], fds[1])
    }

    private func write(_ fd: Int32, _ bytes: [UInt8]) {
        XCTAssertEqual(bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }, bytes.count)
    }

    private func readOne(_ fd: Int32) -> UInt8? {
        var byte: UInt8 = 0
        return Glibc.read(fd, &byte, 1) == 1 ? byte : nil
    }

    private func isOpen(_ fd: Int32) -> Bool { fcntl(fd, F_GETFD) != -1 }

    /// Closes one of the test's pipe ends now (not again at tearDown: its number may be reused).
    private func closeNow(_ fd: Int32) {
        pipes.removeAll { $0 == fd }
        close(fd)
    }

    /// A source on a pipe of its own in `mode`, so that the loop's poll set exists.
    private func addBystander() -> DescriptorSource {
        let source = DescriptorSource(descriptor: makePipe().0, watching: .readable) { _ in }
        loop.add(source, to: mode)
        _ = runOnce()
        return source
    }

    /// Runs the mode once for at most 50 ms; true if a source was handled.
    private func runOnce(_ mode: LoopMode? = nil) -> Bool {
        loop.run(mode: mode ?? self.mode, before: .after(.milliseconds(50)))
    }

    func testAReadablePipeCallsTheHandlerOnTheLoopsThreadAgainWhileDataRemains() {
        let (readEnd, writeEnd) = makePipe()
        let log = EventLog()
        let loop = self.loop!
        let source = DescriptorSource(descriptor: readEnd, watching: .readable) { event in
            guard case .ready(let events) = event else { return XCTFail("unexpected \(event)") }
            XCTAssertTrue(loop.isOwnerThread, "on the loop's thread")
            log.append("\(events) \(self.readOne(readEnd).map(String.init) ?? "nothing")")
        }
        loop.add(source, to: mode)
        write(writeEnd, [7, 8, 9])
        // Level-triggered: each pass that finds data left calls again, one byte per call.
        for _ in 0..<3 { XCTAssertTrue(runOnce(), "a handled source") }
        XCTAssertFalse(runOnce(), "drained: nothing more")
        // The writer goes: readable with hangUp (a read then returns 0).
        closeNow(writeEnd)
        XCTAssertTrue(runOnce())
        XCTAssertEqual(log.all, ["[readable] 7", "[readable] 8", "[readable] 9", "[readable, hangUp] nothing"])
        source.invalidate()
        XCTAssertFalse(loop.contains(source, in: mode))
    }

    func testAWritableSourceReportsWritableAndADisabledOneStaysInItsModesWithoutFiring() {
        let (_, writeEnd) = makePipe()
        let calls = SharedValue(0)
        let source = DescriptorSource(descriptor: writeEnd, watching: .writable) { event in
            XCTAssertEqual(event, .ready(.writable))
            calls.withLock { $0 += 1 }
        }
        loop.add(source, to: mode)
        XCTAssertTrue(runOnce())
        XCTAssertTrue(runOnce(), "still writable: called again")
        source.disable()
        XCTAssertFalse(source.isEnabled)
        let passesBefore = loop.instruments.passes
        XCTAssertEqual(loop.run(mode: mode, timeout: .milliseconds(40), returnAfterSourceHandled: true), .timedOut,
                       "disabled: the mode is not empty (.finished) and nothing fires")
        XCTAssertLessThan(loop.instruments.passes - passesBefore, 5, "the writable pipe did not make the loop spin")
        XCTAssertTrue(loop.contains(source, in: mode), "disabling does not take it out of its mode")
        source.enable()
        XCTAssertTrue(runOnce())
        XCTAssertEqual(calls.withLock { $0 }, 3)
        source.invalidate()
    }

    func testADisabledSourceHearsDataThatCameMeanwhileOnceReEnabledAndSetInterestChangesWhatItWatches() {
        let (readEnd, writeEnd) = makePipe()
        let log = EventLog()
        let source = DescriptorSource(descriptor: readEnd, watching: .readable) { event in
            log.append("\(event)")
            _ = self.readOne(readEnd)
        }
        loop.add(source, to: mode)
        source.disable()
        write(writeEnd, [1])
        XCTAssertFalse(runOnce(), "disabled: not called")
        source.enable()
        XCTAssertTrue(runOnce(), "enabled again: the byte that came meanwhile is heard")
        // One operation changes the interest: watching nothing is as good as disabled.
        source.setInterest([])
        write(writeEnd, [2])
        XCTAssertFalse(runOnce())
        source.setInterest(.readable)
        XCTAssertTrue(runOnce())
        XCTAssertEqual(log.all, ["ready([readable])", "ready([readable])"])
        source.invalidate()
    }

    func testASourceFiresOnlyWhileItsLoopRunsInOneOfItsModesAndDoesNotSpinInOthers() {
        let (readEnd, writeEnd) = makePipe()
        let other = LoopMode("DescriptorSourceTests.other")
        let calls = SharedValue(0)
        let source = DescriptorSource(descriptor: readEnd, watching: .readable) { _ in
            calls.withLock { $0 += 1 }
            _ = self.readOne(readEnd)
        }
        loop.add(source, to: mode)
        write(writeEnd, [1])
        let timer = LoopTimer(after: .milliseconds(40)) { _ in }
        loop.add(timer, to: other)
        let passesBefore = loop.instruments.passes
        XCTAssertEqual(loop.run(mode: other, until: .after(.seconds(10)), returnAfterSourceHandled: false), .finished)
        XCTAssertEqual(calls.withLock { $0 }, 0, "not in the running mode: not called")
        XCTAssertLessThan(loop.instruments.passes - passesBefore, 5, "and its ready descriptor did not wake the loop")
        XCTAssertTrue(runOnce(), "its own mode hears it")
        XCTAssertEqual(calls.withLock { $0 }, 1)
        source.invalidate()
    }

    func testInvalidatingFromAnotherThreadTakesItOutOfEveryModeAndClosesOnlyAnOwnedDescriptor() throws {
        let (ownedEnd, _) = makePipe()
        let (borrowedEnd, _) = makePipe()
        let other = LoopThread()
        let owned = DescriptorSource(descriptor: ownedEnd, watching: .readable, ownership: .owned) { _ in }
        let borrowed = DescriptorSource(descriptor: borrowedEnd, watching: .readable) { _ in }
        try other.loop.performAndWait {
            ThreadRunLoop.current.add(owned, to: .default)
            ThreadRunLoop.current.add(borrowed, to: .common)
        }
        owned.invalidate() // from this thread; finished on the other thread's at its next pass
        borrowed.invalidate()
        XCTAssertFalse(owned.isValid)
        let inModes = try other.loop.performAndWait {
            ThreadRunLoop.current.contains(owned, in: .default) || ThreadRunLoop.current.contains(borrowed, in: .common)
        }
        XCTAssertFalse(inModes)
        XCTAssertFalse(isOpen(ownedEnd), "an owned descriptor is closed once out of the poll set")
        XCTAssertTrue(isOpen(borrowedEnd), "a borrowed one never is")
        other.stop()
    }

    func testAnOwnedDescriptorIsClosedWhenItsLoopsThreadExitsAndDescriptorsDoNotLeak() throws {
        let before = ProcessResources.measure().descriptors
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(nonBlockingPipe(&fds), 0)
        let source = DescriptorSource(descriptor: fds[0], watching: .readable, ownership: .owned) { _ in }
        do {
            let other = LoopThread()
            try other.loop.performAndWait { ThreadRunLoop.current.add(source, to: .default) }
            other.stop() // joins the thread, whose loop is torn down
        }
        XCTAssertFalse(isOpen(fds[0]), "closed at teardown")
        XCTAssertFalse(source.isValid)
        close(fds[1])
        XCTAssertEqual(ProcessResources.measure().descriptors, before, "the pipe, the poll set and its eventfd are gone")
    }

    func testADescriptorClosedBehindTheSourcesBackIsReportedOnceAsLostAndNeverSpins() {
        let (readEnd, writeEnd) = makePipe()
        let log = EventLog()
        let source = DescriptorSource(descriptor: readEnd, watching: .readable, ownership: .owned) { event in
            log.append("\(event)")
        }
        loop.add(source, to: mode)
        XCTAssertFalse(runOnce(), "registered, nothing to read")
        closeNow(readEnd) // behind its back: the kernel drops it from the poll set silently
        write(writeEnd, []) // nothing; the loop cannot hear a closed descriptor
        XCTAssertFalse(runOnce(), "no crash, no spin")
        source.disable() // the next change of what is watched finds it gone
        XCTAssertTrue(runOnce(), "the loss is handled as a source")
        XCTAssertEqual(log.all.count, 1)
        XCTAssertTrue(log.all.first?.hasPrefix("lost(") == true, "\(log.all)")
        XCTAssertTrue(log.all.first?.contains("errno \(ENOENT)") == true || log.all.first?.contains("errno \(EBADF)") == true)
        XCTAssertFalse(source.isValid)
        XCTAssertFalse(loop.contains(source, in: mode))
        XCTAssertFalse(runOnce(), "told once")
        XCTAssertTrue(isOpen(writeEnd))
    }

    func testADescriptorAlreadyClosedOrNotPollableIsReportedAsLostWhenAdded() throws {
        let bystander = addBystander()
        defer { bystander.invalidate() }
        let (readEnd, _) = makePipe()
        closeNow(readEnd)
        let log = EventLog()
        let closed = DescriptorSource(descriptor: readEnd, watching: .readable) { log.append("closed: \($0)") }
        loop.add(closed, to: mode)
        XCTAssertTrue(runOnce())
        XCTAssertTrue(loop.contains(bystander, in: mode), "the others are untouched")
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("descriptor-source-\(getpid())").path
        let file = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        XCTAssertGreaterThanOrEqual(file, 0)
        unlink(path)
        let regular = DescriptorSource(descriptor: file, watching: .readable, ownership: .owned) { log.append("file: \($0)") }
        loop.add(regular, to: mode)
        XCTAssertTrue(runOnce())
        XCTAssertEqual(log.all, [
            "closed: lost(epoll_ctl(ADD) failed: Bad file descriptor (errno \(EBADF)))",
            "file: lost(epoll_ctl(ADD) failed: Operation not permitted (errno \(EPERM)))",
        ])
        XCTAssertFalse(isOpen(file), "an owned, valid descriptor that could not be polled is still closed")
    }
}
