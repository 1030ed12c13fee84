#if ERRNO_INJECTION
import CZeroMQ
import Glibc
import RunLoopSystem
import RunLoopTestSupport
@testable import RunLoopZMQ
import XCTest

/// libzmq's funnel (`zmqCall`, `zmqNonBlockingCall`) forced with `ErrnoInjection`: `EINTR`
/// retried in the process that made the context and `forkedChild` in any other, `EAGAIN`
/// an answer to a non-blocking send or receive, the rest thrown typed.
final class ZMQCallTests: XCTestCase {
    func testAnInterruptedZeroMQCallIsRetriedInTheProcessThatMadeTheContext() throws {
        let (push, pull) = try makePushPull()
        XCTAssertEqual(zmqContextProcess.load(ordering: .relaxed), getpid())
        let injection = ErrnoInjection(.init("zmq_send", errno: EINTR, onAttempts: 1...2))
        XCTAssertTrue(try injection.during { try push.send([[1, 2, 3]], dontWait: false) })
        XCTAssertEqual(injection.calls, ["zmq_send", "zmq_send", "zmq_send"])
        XCTAssertEqual(try pull.receive(dontWait: false), [[1, 2, 3]])
        XCTAssertNil(try pull.receive(dontWait: true), "sent once")
    }

    func testAnInterruptedZeroMQCallInAForkedChildThrowsForkedChildAtOnce() throws {
        let (push, pull) = try makePushPull()
        // A child forked after the context was made: the context's maker is another process.
        let maker = zmqContextProcess.load(ordering: .relaxed)
        zmqContextProcess.store(getppid(), ordering: .relaxed)
        defer { zmqContextProcess.store(maker, ordering: .relaxed) }
        let injection = ErrnoInjection(.init("zmq_send", errno: EINTR, onAttempts: 1...100))
        XCTAssertThrowsError(try injection.during { try push.send([[1]], dontWait: false) }) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: .forkedChild, call: "zmq_send"))
        }
        XCTAssertEqual(injection.calls, ["zmq_send"], "not retried")
        let nonBlocking = ErrnoInjection(.init("zmq_msg_recv", errno: EINTR, onAttempts: 1...100))
        XCTAssertThrowsError(try nonBlocking.during { try pull.receive(dontWait: true) }) { error in
            XCTAssertEqual((error as? SystemCallError)?.code, .forkedChild)
        }
        XCTAssertEqual(nonBlocking.calls, ["zmq_msg_recv"])
    }

    func testAWouldBlockIsANonBlockingReceivesAnswerNotAnError() throws {
        let (push, pull) = try makePushPull()
        XCTAssertTrue(try push.send([[9]], dontWait: false))
        let injection = ErrnoInjection(.init("zmq_msg_recv", errno: EAGAIN))
        XCTAssertNil(try injection.during { try pull.receive(dontWait: true) })
        XCTAssertEqual(injection.calls, ["zmq_msg_recv"])
        XCTAssertEqual(try pull.receive(dontWait: true), [[9]], "the refused attempt took nothing")
    }

    func testANonBlockingSendThatWouldBlockAsksOnceMoreWhenTheSocketIsWritableThenSaysNotQueued() throws {
        let (push, pull) = try makePushPull()
        let once = ErrnoInjection(.init("zmq_send", errno: EAGAIN))
        XCTAssertTrue(try once.during { try push.send([[1]], dontWait: true) }, "writable: the second attempt queued it")
        XCTAssertEqual(once.calls.filter { $0 == "zmq_send" }.count, 2)
        let twice = ErrnoInjection(.init("zmq_send", errno: EAGAIN, onAttempts: 1...2))
        XCTAssertFalse(try twice.during { try push.send([[2]], dontWait: true) }, "would block: not queued, no error")
        XCTAssertEqual(try pull.receive(dontWait: false), [[1]])
        XCTAssertNil(try pull.receive(dontWait: true), "the second message was not queued")
    }

    func testAZeroMQCallThatFailsOtherwiseThrowsItsCodeTypedWithoutARetry() throws {
        let (push, _) = try makePushPull()
        let injection = ErrnoInjection(.init("zmq_send", errno: SystemCallError.Code.terminated.rawValue))
        XCTAssertThrowsError(try injection.during { try push.send([[1]], dontWait: false) }) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: .terminated, call: "zmq_send"))
        }
        XCTAssertEqual(injection.calls, ["zmq_send"])
        let noSocket = ErrnoInjection(.init("zmq_socket", errno: EMFILE))
        XCTAssertThrowsError(try noSocket.during { try ZMQSocket(type: .pull) }) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError(code: .tooManyOpenFiles, call: "zmq_socket"))
        }
    }
}
#endif
