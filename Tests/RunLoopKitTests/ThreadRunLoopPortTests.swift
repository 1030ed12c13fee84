import Glibc
@testable import RunLoopCore // for core internals it reads: the loop's pass counts
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// A thread's loop asleep at no cost with a ZeroMQ port among its sources: libzmq's
/// descriptor signals for the socket's own commands too, and the loop must not spin on
/// them. The loop serving port sources (batches, step 9) is tested in RunLoopCoreTests
/// (`PortBatchTests`, with fake ports).
final class ThreadRunLoopPortTests: XCTestCase {
    func testAnIdleMainLoopHoldingAPortADescriptorASignalAChildAndTheMainQueueUsesNoCPU() throws {
        precondition(ThreadRunLoop.current.isMain, "the main loop, so that the main queue is watched too")
        let loop = ThreadRunLoop.current
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(nonBlockingPipe(&fds), 0)
        defer { close(fds[1]) }
        let descriptor = DescriptorSource(descriptor: fds[0], watching: .readable, ownership: .owned) { _ in }
        let signal = try SignalSource(.user1) { _ in }
        let child = spawnChild(["/bin/sleep", "30"])
        let childSource = try ChildProcessSource(pid: child) { _ in }
        let port = try LocalPort()
        loop.add(descriptor, to: .default)
        loop.add(signal, to: .default)
        loop.add(childSource, to: .default)
        loop.add(port, to: .default)
        _ = loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: false) // registrations made
        let passes = loop.instruments.passes
        let before = threadCPUTime()
        XCTAssertEqual(loop.run(mode: .default, timeout: .seconds(1), returnAfterSourceHandled: true), .timedOut)
        let spent = threadCPUTime() - before
        XCTAssertLessThan(spent, .milliseconds(20), "idle loop spent \(spent) of CPU in 1 s")
        XCTAssertLessThanOrEqual(loop.instruments.passes - passes, 2, "it slept instead of making passes")
        print("idle main loop with a port, descriptor, signal and child source: \(spent) CPU in 1 s")
        kill(child, SIGKILL)
        childSource.invalidate()
        var status: Int32 = 0
        waitpid(child, &status, 0)
        descriptor.invalidate()
        signal.invalidate()
        port.invalidate()
    }
}
