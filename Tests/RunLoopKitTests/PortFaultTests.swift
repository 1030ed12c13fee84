import Dispatch
import Foundation
import Glibc
@testable import RunLoopCore
@testable import RunLoopKit
@testable import RunLoopSystem
@testable import RunLoopWire
@testable import RunLoopZMQ
import XCTest

/// Faults around ports: dead peers, exited threads, full queues. Nothing hangs, nothing
/// accepted is lost, every failure is a typed error.
final class PortFaultTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    func testARequesterTimesOutWhenThePeerProcessIsKilledMidRequestAndTheNameCanBeTakenAgain() throws {
        let worker = try builtExecutable("multiprocess-checkin")
        let mainName = "fault-main-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        var checkedIn: String?
        let mainPort = try LocalPort(name: mainName) { message in
            if message.id == 100 { checkedIn = message.text }
            return nil
        }
        loop.add(mainPort, to: .default)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: worker)
        process.arguments = ["--worker-of", mainName, "--index", "0"]
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        XCTAssertTrue(runCurrentLoop { checkedIn != nil }, "the worker process checked in")
        let workerName = try XCTUnwrap(checkedIn)
        let remote = try RemotePort(named: workerName)
        XCTAssertEqual(try remote.sendRequest(LoopMessage(id: 1, text: "warm-up"), sendTimeout: .seconds(10),
                                              receiveTimeout: .seconds(10)).id, 1, "it answers while alive")

        kill(process.processIdentifier, SIGSTOP) // frozen: it takes the request but cannot answer
        let started = Deadline.now()
        XCTAssertThrowsError(try remote.sendRequest(LoopMessage(id: 1, text: "mid-request"), sendTimeout: .seconds(2),
                                                    receiveTimeout: .milliseconds(300))) {
            XCTAssertEqual($0 as? PortError, .receiveTimedOut(remote.address))
        }
        XCTAssertLessThan(Deadline.now() - started, .seconds(5), "the requester went on after its timeout")
        kill(process.processIdentifier, SIGKILL) // dies with the request in its queue
        process.waitUntilExit()

        let taken = try LocalPort(name: workerName)
        XCTAssertEqual(taken.name, workerName, "the dead process's name is free again")
        taken.invalidate()
        mainPort.invalidate()
    }

    func testSendsToAPortOfAThreadThatExitedFailCleanly() throws {
        let portBox = LockedValue<LocalPort?>(nil)
        TestThread {
            let port = try? LocalPort { _ in nil }
            if let port { ThreadRunLoop.current.add(port, to: .default) }
            portBox.withLock { $0 = port }
        }.join() // the thread exits without invalidating its port: teardown closes it
        let port = try XCTUnwrap(portBox.withLock { $0 })
        XCTAssertFalse(port.isValid)
        XCTAssertThrowsError(try port.remote.send(LoopMessage(id: 1), timeout: .seconds(10))) {
            XCTAssertEqual($0 as? PortError, .remoteInvalid(port.remote.address))
        }
        XCTAssertThrowsError(try port.remote.sendRequest(LoopMessage(id: 1))) {
            XCTAssertEqual($0 as? PortError, .remoteInvalid(port.remote.address))
        }
    }

    func testAPortReleasedWithItsThreadNeverLeavesSendersQueueingIntoNothing() throws {
        // The thread keeps no reference to its port: only its loop's mode holds it, and the
        // port is freed during the thread's teardown.
        let remoteBox = LockedValue<RemotePort?>(nil)
        TestThread {
            guard let port = try? LocalPort(name: "released-\(getpid())", handler: { _ in nil }) else { return }
            ThreadRunLoop.current.add(port, to: .default)
            remoteBox.withLock { $0 = RemotePort(port.inProcessAddress) }
        }.join()
        let remote = try XCTUnwrap(remoteBox.withLock { $0 })
        XCTAssertThrowsError(try remote.send(LoopMessage(id: 1), timeout: .seconds(10))) {
            XCTAssertEqual($0 as? PortError, .remoteInvalid(remote.address), "known closed: not queued for nobody")
        }
        XCTAssertThrowsError(try RemotePort(named: "released-\(getpid())")) {
            XCTAssertEqual($0 as? PortError, .nameNotFound("released-\(getpid())"), "and its name was given back")
        }
    }

    func testABlockedReceiverMakesSendersTimeOutAndWhenItReadsAgainEverythingAcceptedArrives() throws {
        var received = 0
        let port = try LocalPort(receiveHighWaterMark: 100) { _ in received += 1; return nil }
        loop.add(port, to: .default)
        let accepted = LockedValue(0)
        let failures = LockedValue<[PortError]>([])
        // The loop does not run while the sender fills the queue: the receiver "stopped reading".
        TestThread {
            for index in 0..<50_000 {
                do {
                    try port.remote.send(LoopMessage(id: Int32(index)), timeout: .milliseconds(20))
                    accepted.withLock { $0 += 1 }
                } catch {
                    failures.withLock { $0.append(error as? PortError ?? .invalidated) }
                    if failures.withLock({ $0.count }) == 3 { return }
                }
            }
        }.join()
        let sent = accepted.withLock { $0 }
        XCTAssertEqual(failures.withLock { $0 }, Array(repeating: .sendTimedOut(port.remote.address), count: 3))
        XCTAssertLessThan(sent, 50_000, "the high-water marks bounded what was queued")
        XCTAssertTrue(runCurrentLoop { received == sent }, "received \(received) of \(sent) accepted")
        XCTAssertEqual(loop.run(mode: .default, timeout: .milliseconds(50), returnAfterSourceHandled: true), .timedOut,
                       "and nothing more than was accepted")
        XCTAssertEqual(received, sent)
        port.invalidate()
    }
}
