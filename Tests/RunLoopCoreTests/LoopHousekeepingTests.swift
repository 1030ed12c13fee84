import Glibc
@testable import RunLoopCore
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// Loop housekeeping (`LoopHousekeeping`): a descriptor the loop watches in every mode for
/// its own upkeep, whose handler never counts as a handled source.
final class LoopHousekeepingTests: XCTestCase {
    /// A non-blocking pipe: (read end, write end).
    private func makePipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        try systemCall("pipe") { nonBlockingPipe(&fds) }
        return (fds[0], fds[1])
    }

    private func readAll(_ fd: Int32) {
        var bytes = [UInt8](repeating: 0, count: 64)
        while (try? bytes.withUnsafeMutableBytes({ try Kernel.read(fd, into: $0) })).map({ $0 > 0 }) == true {}
    }

    func testAHousekeepingDescriptorIsHandledInAModeWithNoSourceOfItsOwnWithoutEndingTheRun() throws {
        let loop = ThreadRunLoop.current
        try loop.poller.preparePollSet()
        let ends = try makePipe()
        defer { Kernel.close(ends.read); Kernel.close(ends.write) }
        var handled = 0
        let housekeeping = LoopHousekeeping(descriptor: ends.read, watching: .readable) {
            handled += 1
            self.readAll(ends.read) // consumed: level-triggered, it would be reported again at once
        }
        loop.addHousekeeping(housekeeping)
        defer { loop.removeHousekeeping(housekeeping) }
        // A mode of its own, holding only a timer that ends the run: the housekeeping is in no mode.
        let mode = LoopMode("housekeeping-\(UInt32.random(in: 0...UInt32.max))")
        var fired = false
        let timer = LoopTimer(after: .milliseconds(200)) { _ in fired = true }
        loop.add(timer, to: mode)
        defer { timer.invalidate() }
        _ = try [UInt8(1)].withUnsafeBytes { try Kernel.write(ends.write, $0) }
        let result = loop.run(mode: mode, until: .after(.seconds(10)), returnAfterSourceHandled: true)
        XCTAssertEqual(handled, 1, "handled once, then consumed")
        XCTAssertTrue(fired, "the run went on to its timer: the housekeeping is no handled source")
        XCTAssertNotEqual(result, .handledSource)
    }

    func testARemovedHousekeepingDescriptorIsNoLongerWatched() throws {
        let loop = ThreadRunLoop.current
        try loop.poller.preparePollSet()
        let ends = try makePipe()
        defer { Kernel.close(ends.read); Kernel.close(ends.write) }
        var handled = 0
        let housekeeping = LoopHousekeeping(descriptor: ends.read, watching: .readable) { handled += 1 }
        loop.addHousekeeping(housekeeping)
        loop.removeHousekeeping(housekeeping)
        let mode = LoopMode("housekeeping-\(UInt32.random(in: 0...UInt32.max))")
        let timer = LoopTimer(after: .milliseconds(50)) { _ in }
        loop.add(timer, to: mode)
        defer { timer.invalidate() }
        _ = try [UInt8(1)].withUnsafeBytes { try Kernel.write(ends.write, $0) }
        _ = loop.run(mode: mode, until: .after(.seconds(10)), returnAfterSourceHandled: true)
        XCTAssertEqual(handled, 0)
    }
}
