import Dispatch
import Glibc
@testable import RunLoopCore
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// A loop serving its port sources: messages in batches in step 9 of the pass, bounded in
/// number and in time, ended by a stop or a nested run, and a busy port beside a
/// descriptor source. The ports are `FakePort`s: what libzmq adds is tested in
/// RunLoopKitTests (`ThreadRunLoopPortTests`).
final class PortBatchTests: XCTestCase {
    // MARK: - Port messages in batches (step 9)

    /// On a fresh thread: a port with `count` messages already queued, a handler that
    /// records the passes (`beforeSources` notifications) it ran in, and `body`'s checks.
    private func withQueuedMessages(_ count: Int, file: StaticString = #filePath, line: UInt = #line,
                                    _ body: @escaping @Sendable (ThreadRunLoop, FakePort, BatchLog) throws -> Void) {
        let failure = LockedValue<String?>(nil)
        TestThread {
            do {
                let loop = ThreadRunLoop.current
                let log = BatchLog()
                let port = try FakePort { number in log.handled(Int32(number)) }
                loop.addItem(.port(port), binding: nil, to: .default)
                loop.add(LoopObserver(activities: .beforeSources) { _, _ in log.pass() }, to: .default)
                port.send(count)
                try body(loop, port, log)
                loop.removeEverywhere(.port(port))
            } catch {
                failure.withLock { $0 = "\(error)" }
            }
        }.join()
        if let failure = failure.withLock({ $0 }) { XCTFail(failure, file: file, line: line) }
    }

    func testABurstIsDeliveredInBatchesOfAtMost64MessagesWithOneBeforeSourcesPerPass() {
        withQueuedMessages(200) { loop, _, log in
            log.onHandled = { if $0 == 199 { loop.stop() } }
            XCTAssertEqual(loop.run(mode: .default, until: .after(.seconds(20)), returnAfterSourceHandled: false), .stopped)
            XCTAssertEqual(log.ids, Array(0..<200))
            XCTAssertLessThanOrEqual(log.largestBatch, ThreadRunLoop.portBatchLimit)
            XCTAssertGreaterThan(log.largestBatch, 1, "several messages in one pass")
            XCTAssertLessThan(log.passes, 100, "batched: far fewer passes than messages (\(log.passes))")
        }
    }

    func testABatchOfSlowHandlersEndsOnceItsTimeIsSpentAtTheNextClockRead() {
        // Each handler works for 200 µs (of the thread's wall time: a busier machine only
        // makes it longer). The batch's time counts from the end of its first message; the
        // clock is read then and after every fourth, so at the fourth 600 µs are spent and
        // the batch ends there. Without the time bound it would be 20.
        let stride = ThreadRunLoop.portBatchClockStride
        withQueuedMessages(20) { loop, _, log in
            log.onHandled = { id in
                let until = ContinuousClock.now + .microseconds(200)
                while ContinuousClock.now < until {}
                if id == 19 { loop.stop() }
            }
            XCTAssertEqual(loop.run(mode: .default, until: .after(.seconds(20)), returnAfterSourceHandled: false), .stopped)
            XCTAssertEqual(log.ids, Array(0..<20))
            XCTAssertLessThanOrEqual(log.largestBatch, stride, "the batch ended at the first clock read past 500 µs")
            XCTAssertGreaterThanOrEqual(log.passes, 20 / stride)
        }
    }

    func testRunsThatReturnAfterAHandledSourceTakeOneMessageEachAndTheLastTakesThePortOffTheReadyQueue() {
        // After its one message a run asks the port (`ZMQ_EVENTS`): queued while more wait (nothing
        // signals the descriptor again for them), off the queue after the last, so that the
        // next run sleeps at once instead of making a pass whose receive finds nothing.
        withQueuedMessages(5) { loop, port, log in
            for count in 1...5 {
                XCTAssertEqual(loop.run(mode: .default, timeout: .seconds(10), returnAfterSourceHandled: true), .handledSource)
                XCTAssertEqual(log.ids, Array(0..<Int32(count)))
                XCTAssertEqual(loop.isQueuedAsReady(port), count < 5, "after message \(count - 1) of 5")
            }
        }
    }

    func testAHandlerThatStopsTheLoopEndsTheBatchAndTheNextRunGoesOn() {
        withQueuedMessages(10) { loop, _, log in
            log.onHandled = { if $0 == 2 || $0 == 9 { loop.stop() } }
            XCTAssertEqual(loop.run(mode: .default, until: .after(.seconds(10)), returnAfterSourceHandled: false), .stopped)
            XCTAssertEqual(log.ids, [0, 1, 2], "nothing delivered after the stop")
            XCTAssertEqual(loop.run(mode: .default, until: .after(.seconds(10)), returnAfterSourceHandled: false), .stopped)
            XCTAssertEqual(log.ids, Array(0..<10))
        }
    }

    func testAHandlerThatRunsTheLoopItselfEndsTheOuterBatch() {
        withQueuedMessages(3) { loop, _, log in
            let nested: LoopMode = "nested"
            loop.add(InputSource {}, to: nested) // so that the nested run has something to run
            log.onHandled = { id in
                if id == 0 { _ = loop.run(mode: nested, timeout: .zero, returnAfterSourceHandled: false) }
                if id == 2 { loop.stop() }
            }
            XCTAssertEqual(loop.run(mode: .default, until: .after(.seconds(10)), returnAfterSourceHandled: false), .stopped)
            XCTAssertEqual(log.ids, [0, 1, 2])
            XCTAssertEqual(log.passOfMessage[0].map { $0 + 1 }, log.passOfMessage[1], "message 1 came in the next pass")
        }
    }
    // MARK: - Ports beside descriptor sources

    func testABusyPortDoesNotStarveADescriptorSourceOfTheSameMode() throws {
        let loop = ThreadRunLoop.current
        let mode = LoopMode("PortBatchTests")
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(nonBlockingPipe(&fds), 0)
        let (readEnd, writeEnd) = (fds[0], fds[1])
        defer { close(readEnd); close(writeEnd) }
        let delivered = SharedValue(0)
        let port = try FakePort { _ in delivered.withLock { $0 += 1 } }
        loop.addItem(.port(port), binding: nil, to: mode)
        let messagesBeforeTheDescriptor = SharedValue<Int?>(nil)
        let source = DescriptorSource(descriptor: readEnd, watching: .readable) { _ in
            var byte: UInt8 = 0
            _ = read(readEnd, &byte, 1)
            messagesBeforeTheDescriptor.withLock { $0 = delivered.withLock { $0 } }
        }
        loop.add(source, to: mode)
        port.send(500)
        XCTAssertTrue(loop.run(mode: mode, before: .after(.milliseconds(50))), "the port is ready and delivering")
        var one: UInt8 = 1
        XCTAssertEqual(write(writeEnd, &one, 1), 1)
        // A ready port skips the sleep, one batch per pass; the descriptor is still looked at.
        XCTAssertTrue(runCurrentLoop(in: mode) { delivered.withLock { $0 } == 500 })
        let before = try XCTUnwrap(messagesBeforeTheDescriptor.withLock { $0 }, "the descriptor was heard")
        XCTAssertLessThan(before, 10, "heard within the next passes, not once the port was drained")
        source.invalidate()
        loop.removeEverywhere(.port(port))
    }
}

/// What `withQueuedMessages`' handler saw. Its loop's thread only.
final class BatchLog: @unchecked Sendable {
    private(set) var ids: [Int32] = []
    private(set) var passes = 0
    private(set) var largestBatch = 0
    /// For each message id, the pass it was delivered in.
    private(set) var passOfMessage: [Int32: Int] = [:]
    var onHandled: (Int32) -> Void = { _ in }
    private var inThisPass = 0

    func pass() {
        passes += 1
        inThisPass = 0
    }

    func handled(_ id: Int32) {
        ids.append(id)
        inThisPass += 1
        largestBatch = max(largestBatch, inThisPass)
        passOfMessage[id] = passes
        onHandled(id)
    }
}
