import Dispatch
import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// Faults around ports: dead peers, exited threads, full queues. Nothing hangs, nothing
/// accepted is lost, every failure is a typed error.
final class PortFaultTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    /// A peer process written from the docs alone (docs/wire-format.md; the name's lock file
    /// as `PortsAndCheckIn` describes it): it takes a name, prints `ready`, and prints
    /// `got the request` once a request reaches its port, which it never answers.
    private static let silentPeer = """
        import fcntl, os, struct, sys, time, zmq
        directory, name = sys.argv[1], sys.argv[2]
        lock = os.open(f"{directory}/{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.fcntl(lock, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
        port = zmq.Context().socket(zmq.ROUTER)
        port.bind(f"ipc://{directory}/{name}.sock")
        os.write(lock, f"{os.getpid()}\\n".encode())
        print("ready", flush=True)
        if port.poll(30000):
            port.recv_multipart()
            print("got the request", flush=True)
        time.sleep(60)
        """

    func testARequesterFailsAtOnceAsRemoteInvalidWhenThePeerProcessIsKilledMidRequestAndTheNameCanBeTakenAgain() throws {
        let name = "fault-peer-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let directory = try RuntimeDirectory.path()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", Self.silentPeer, directory, name]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        // Each line the peer prints, as it prints it.
        let lines = LockedValue<[String]>([])
        let printed = DispatchSemaphore(value: 0)
        let reader = TestThread {
            var pending = Data()
            while true {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { // the end: a peer that failed to start fails the test at once
                    printed.signal()
                    return
                }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: 0x0A) {
                    lines.withLock { $0.append(String(decoding: pending[..<newline], as: UTF8.self)) }
                    pending.removeSubrange(...newline)
                    printed.signal()
                }
            }
        }
        defer {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            reader.join()
        }
        waitOrFail(printed, seconds: 30, "the peer process to take its name")
        XCTAssertEqual(lines.withLock { $0 }, ["ready"])
        let remote = try RemotePort(named: name)

        // The request goes out from another thread; the peer is killed the moment it has it.
        // Then the same thread asks again under the same name, once a new owner holds it.
        let receiveTimeout = Duration.seconds(3)
        let outcome = LockedValue<(error: PortError?, took: Duration)?>(nil)
        let (failed, nameTaken) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let answer = LockedValue<Result<String?, PortError>?>(nil)
        let requester = TestThread {
            let started = Deadline.now()
            let result = Result { () throws(PortError) in
                try remote.sendRequest(LoopMessage(id: 1, text: "mid-request"), sendTimeout: .seconds(10),
                                       receiveTimeout: receiveTimeout)
            }
            let error: PortError? = if case .failure(let error) = result { error } else { nil }
            outcome.withLock { $0 = (error, Deadline.now() - started) }
            failed.signal()
            guard nameTaken.wait(timeout: .now() + 30) == .success else { return }
            let again = Result { () throws(PortError) in
                try RemotePort(named: name).sendRequest(LoopMessage(id: 2), sendTimeout: .seconds(10),
                                                        receiveTimeout: .seconds(10)).text
            }
            answer.withLock { $0 = again }
        }
        waitOrFail(printed, seconds: 30, "the peer to get the request")
        XCTAssertEqual(lines.withLock { $0 }, ["ready", "got the request"])
        XCTAssertNil(outcome.withLock { $0 }, "the request is still outstanding when its peer dies")
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationReason, .uncaughtSignal)
        waitOrFail(failed, seconds: 30, "the requester to give up")

        let (error, took) = try XCTUnwrap(outcome.withLock { $0 })
        XCTAssertEqual(error, .remoteInvalid(remote.address), "a typed error, not a hang or a trap")
        XCTAssertLessThan(took, receiveTimeout, "the requester went on at once, not at its timeout")
        // The dead process's name is free again, and the requester's next request under it
        // reaches the new owner.
        XCTAssertThrowsError(try RemotePort(named: name)) {
            XCTAssertEqual($0 as? PortError, .nameNotFound(name), "a dead owner's name does not resolve")
        }
        var answered = false
        let taken = try LocalPort(name: name) { request in
            answered = true
            return LoopMessage(id: request.id, text: "answered")
        }
        loop.add(taken, to: .default)
        defer { taken.invalidate() }
        XCTAssertEqual(taken.name, name, "the dead process's name is free again")
        nameTaken.signal()
        XCTAssertTrue(runCurrentLoop { answered }, "the requester's next request reaches the name's new owner")
        requester.join()
        XCTAssertEqual(try answer.withLock { $0 }?.get(), "answered")
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
        let receiveHighWaterMark: Int32 = 100
        let port = try LocalPort(receiveHighWaterMark: receiveHighWaterMark) { _ in received += 1; return nil }
        loop.add(port, to: .default)
        // docs/reliability.md, "Back-pressure": at most receiveHighWaterMark + 10,000 per
        // sending thread are queued; here one thread sends.
        let bound = Int(receiveHighWaterMark + ThreadPortState.sendHighWaterMark)
        let accepted = LockedValue(0)
        let acceptedBeforeFirstFailure = LockedValue<Int?>(nil)
        let failures = LockedValue<[PortError]>([])
        // The loop does not run while the sender fills the queue: the receiver "stopped reading".
        TestThread {
            for index in 0..<(bound * 3) {
                do {
                    try port.remote.send(LoopMessage(id: Int32(index)), timeout: .milliseconds(20))
                    accepted.withLock { $0 += 1 }
                } catch {
                    if failures.withLock({ $0.isEmpty }) { acceptedBeforeFirstFailure.withLock { $0 = accepted.withLock { $0 } } }
                    failures.withLock { $0.append(error as? PortError ?? .invalidated) }
                    if failures.withLock({ $0.count }) == 3 { return }
                }
            }
        }.join()
        let sent = accepted.withLock { $0 }
        XCTAssertEqual(failures.withLock { $0 }, Array(repeating: .sendTimedOut(port.remote.address), count: 3))
        let beforeFailing = try XCTUnwrap(acceptedBeforeFirstFailure.withLock { $0 }, "\(sent) sends, none refused")
        print("a blocked receiver: \(beforeFailing) sends accepted before the first sendTimedOut (bound \(bound))")
        XCTAssertLessThanOrEqual(beforeFailing, bound, "the high-water marks bound what is queued")
        XCTAssertGreaterThanOrEqual(beforeFailing, Int(ThreadPortState.sendHighWaterMark),
                                    "the sending socket's queue was used before the sender had to wait")
        XCTAssertEqual(sent, beforeFailing, "nothing was accepted after the first timeout (nobody read meanwhile)")
        XCTAssertTrue(runCurrentLoop { received == sent }, "received \(received) of \(sent) accepted")
        XCTAssertEqual(loop.run(mode: .default, timeout: .milliseconds(50), returnAfterSourceHandled: true), .timedOut,
                       "and nothing more than was accepted")
        XCTAssertEqual(received, sent)
        port.invalidate()
    }
}
