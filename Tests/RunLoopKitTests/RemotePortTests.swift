import Dispatch
import Foundation
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopWire
import XCTest

/// Sending and request/reply through remote ports.
final class RemotePortTests: XCTestCase {
    func testARequestGetsTheRemoteHandlersReturnValueAsItsReply() throws {
        let server = LoopThread { loop in
            let port = try! LocalPort(name: "echo-\(getpid())") { request in
                LoopMessage(id: request.id + 1, text: "echo: \(request.text ?? "")")
            }
            loop.add(port, to: .default)
        }
        let remote = try RemotePort(named: "echo-\(getpid())")
        for index in 0..<20 {
            let reply = try remote.sendRequest(LoopMessage(id: Int32(index), text: "r\(index)"),
                                               sendTimeout: .seconds(10), receiveTimeout: .seconds(10))
            XCTAssertEqual(reply.id, Int32(index), "a reply carries its request's id")
            XCTAssertEqual(reply.text, "echo: r\(index)")
        }
        server.stop()
    }

    /// A request whose reply has not come when its send returns sleeps in the nested run's
    /// first pass: the send's `ZMQ_EVENTS` takes the connection off the ready queue, so no
    /// pass only finds it empty (a reply already there is delivered by that first pass).
    func testEachRequestMakesOnePassWhetherItsReplyCameDuringTheSendOrLater() throws {
        let name = "one-pass-\(getpid())"
        let server = LoopThread { loop in
            let port = try! LocalPort(name: name) { request in request }
            loop.add(port, to: .default)
        }
        let remote = try RemotePort(named: name)
        let loop = ThreadRunLoop.current
        _ = try remote.sendRequest(LoopMessage(id: 0), receiveTimeout: .seconds(10)) // the connection joins the loop
        let before = loop.counters
        let requests = 200
        for index in 1...requests {
            let reply = try remote.sendRequest(LoopMessage(id: Int32(index)), receiveTimeout: .seconds(10))
            XCTAssertEqual(reply.id, Int32(index))
        }
        let passes = loop.counters.passes - before.passes
        let wakeUps = loop.counters.wakeUps - before.wakeUps
        // A wake-up for a command that is no reply (libzmq tells a sender now and then that
        // its peer read) costs a pass more; a pass that only found the connection empty
        // used to come before every sleep, making it about two per request.
        XCTAssertGreaterThanOrEqual(passes, requests)
        XCTAssertLessThanOrEqual(passes, requests + requests / 10, "\(passes) passes, \(wakeUps) wake-ups for \(requests) requests")
        server.stop()
    }

    func testBytesSentFromAPlainThreadAndFromALoopThreadArriveAsTheMessageThatHoldsThem() throws {
        var received: [LoopMessage] = []
        let port = try LocalPort { message in received.append(message); return nil }
        ThreadRunLoop.current.add(port, to: .default)
        let remote = port.remote
        TestThread {
            do { try [UInt8]([1, 2, 3]).withUnsafeBytes { try remote.send(id: 11, bytes: $0) } } catch { XCTFail("\(error)") }
        }.join()
        let worker = try WorkerThread(name: "bytes-sender")
        try worker.performAndWait {
            do { try Array("from a loop".utf8).withUnsafeBytes { try remote.send(id: 12, bytes: $0) } } catch { XCTFail("\(error)") }
        }
        XCTAssertTrue(runCurrentLoop { received.count == 2 })
        XCTAssertEqual(received, [LoopMessage(id: 11, components: [.data([1, 2, 3])]), LoopMessage(id: 12, text: "from a loop")])
        worker.stop()
        port.invalidate()
    }

    func testWhileARequestWaitsTheCallerServicesOnlyThePrivateReplyMode() throws {
        var defaultModeWork = 0
        let caller = ThreadRunLoop.current
        let source = InputSource { defaultModeWork += 1 }
        caller.add(source, to: .default)
        let seenModes = LockedValue<[LoopMode]>([])
        let server = LoopThread { loop in
            let port = try! LocalPort(name: "private-mode-\(getpid())") { request in
                source.signal() // would run at once if the caller serviced its default mode
                caller.wakeUp()
                return LoopMessage(id: 0)
            }
            loop.add(port, to: .default)
        }
        let observer = LoopObserver(activities: .entry) { _, _ in seenModes.withLock { $0.append(caller.currentMode!) } }
        caller.add(observer, to: .default)
        caller.add(observer, to: PendingReplies.mode)
        _ = try RemotePort(named: "private-mode-\(getpid())").sendRequest(LoopMessage(id: 1))
        XCTAssertEqual(defaultModeWork, 0, "the default mode's source waited")
        XCTAssertEqual(seenModes.withLock { $0 }.filter { $0 == .default }, [])
        XCTAssertTrue(seenModes.withLock { $0 }.contains(PendingReplies.mode))
        XCTAssertTrue(caller.run(mode: .default, before: .after(.seconds(10))))
        XCTAssertEqual(defaultModeWork, 1)
        source.invalidate()
        observer.invalidate()
        server.stop()
    }

    func testARequestToAPortWhoseLoopIsNotRunningTimesOutOnReceive() throws {
        let blocked = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let portBox = LockedValue<LocalPort?>(nil)
        let server = TestThread {
            let port = try! LocalPort { _ in LoopMessage(id: 0) }
            ThreadRunLoop.current.add(port, to: .default)
            portBox.withLock { $0 = port }
            blocked.signal()
            release.wait() // takes the request into its queue but never runs its loop meanwhile
            port.invalidate()
        }
        blocked.wait()
        let remote = portBox.withLock { $0 }!.remote
        XCTAssertThrowsError(try remote.sendRequest(LoopMessage(id: 1), sendTimeout: .seconds(10),
                                                    receiveTimeout: .milliseconds(100))) {
            XCTAssertEqual($0 as? PortError, .receiveTimedOut(remote.address))
        }
        release.signal()
        server.join()
    }

    func testARequestToAVanishedPortFailsAsInvalidAndToANameNobodyHoldsAsNotFound() throws {
        let port = try LocalPort { _ in nil }
        let remote = port.remote
        port.invalidate()
        XCTAssertThrowsError(try remote.sendRequest(LoopMessage(id: 1), sendTimeout: .seconds(10), receiveTimeout: .seconds(10))) {
            XCTAssertEqual($0 as? PortError, .remoteInvalid(remote.address))
        }
        XCTAssertThrowsError(try RemotePort(named: "nobody-holds-this-\(getpid())")) {
            XCTAssertEqual($0 as? PortError, .nameNotFound("nobody-holds-this-\(getpid())"))
        }
    }

    func testASendToAPeerThatDoesNotReceiveTimesOutOnceItsQueueIsFull() throws {
        let port = try LocalPort(receiveHighWaterMark: 1) { _ in nil } // never serviced: no loop runs it
        let failure = LockedValue<PortError?>(nil)
        let sent = LockedValue(0)
        TestThread {
            do {
                while true {
                    try port.remote.send(LoopMessage(id: 1), timeout: .milliseconds(50))
                    sent.withLock { $0 += 1 }
                }
            } catch {
                failure.withLock { $0 = error as? PortError }
            }
        }.join()
        XCTAssertEqual(failure.withLock { $0 }, .sendTimedOut(port.remote.address))
        XCTAssertGreaterThan(sent.withLock { $0 }, 0)
        XCTAssertLessThanOrEqual(sent.withLock { $0 }, Int(ThreadPortState.sendHighWaterMark) + 2, "memory stays bounded")
        port.invalidate()
    }

    func testARequestToAForeignServerOverTCPGetsItsReplyOverTheRequestsOwnConnection() throws {
        let peer = try ForeignTCPResponder(answer: "pong")
        let reply = try RemotePort(peer.address).sendRequest(LoopMessage(id: 5, text: "ping"),
                                                             sendTimeout: .seconds(10), receiveTimeout: .seconds(10))
        XCTAssertEqual(reply.id, 5)
        XCTAssertEqual(reply.text, "pong")
        let request = try XCTUnwrap(peer.requestSeen())
        XCTAssertEqual(request.kind, .request)
        XCTAssertNil(request.replyAddress, "the requester binds nothing: the server can answer a requester it cannot reach")
    }
}
