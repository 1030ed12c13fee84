import Glibc
@testable import RunLoopCore
@testable import RunLoopKit
import RunLoopSystem
import RunLoopTestSupport
import RunLoopWire
import RunLoopZMQ
import XCTest

/// Reply rights under races: answers from pool workers, drops, a requester's cancels and
/// the port's invalidation, all at once. Whatever wins, each request is answered at most
/// once, an answer is what its holder chose, and no right is left counted.
final class ReplyRightRaceTests: XCTestCase {
    /// What the right's holder does with request `id`: 0 reply, 1 fail, 2 drop.
    private static func choice(_ id: UInt64) -> UInt64 { (id &* 0x9E37_79B9_7F4A_7C15) >> 62 % 3 }

    private struct Refused: Error {}

    /// A port on its own thread whose requests go to a pool of two workers, each of which
    /// replies, fails or drops the right as `choice` says.
    private func poolServer(_ pool: WorkerPool) -> (LoopThread, LocalPort) {
        let served = SharedValue<LocalPort?>(nil)
        let thread = LoopThread { loop in
            let port = try! LocalPort(handling: .deferring { message, right in
                guard let right else { return }
                let id = UInt64(message.id)
                _ = try? pool.perform(moving: right) { right in
                    switch ReplyRightRaceTests.choice(id) {
                    case 0: right.reply(LoopMessage(id: 0, text: "r\(id)"))
                    case 1: right.fail(Refused())
                    default: _ = consume right
                    }
                }
            })
            loop.add(port, to: .default)
            served.withLock { $0 = port }
        }
        return (thread, served.withLock { $0! })
    }

    /// Every message `dealer` has received, decoded, once nothing more can come.
    private func drain(_ dealer: ZMQSocket) throws -> [WireMessage] {
        var received: [WireMessage] = []
        while let frames = try dealer.receive(dontWait: true) { received.append(try WireCodec.decode(frames)) }
        return received
    }

    func testAnswersDropsAndCancelsRacingFromManyThreadsAnswerEachRequestAtMostOnce() throws {
        let pool = try WorkerPool(name: "race", count: 2)
        let (thread, port) = poolServer(pool)
        let dealer = try ZMQSocket(type: .dealer)
        try dealer.setOption(.receiveHighWaterMark, 0)
        try dealer.connect(port.remote.address.rawValue)
        let count: UInt64 = 3000
        for id in 1...count {
            XCTAssertTrue(try dealer.send(LoopMessage(id: Int32(id)), as: .request, correlationID: id, dontWait: false))
            if id % 3 == 0 { // cancelled while the pool may be answering it
                XCTAssertTrue(try dealer.send(LoopMessage(id: Int32(id)), as: .cancel, correlationID: id, dontWait: false))
            }
        }
        XCTAssertTrue(waitUntil(within: .seconds(30)) { port.statistics.messagesReceived == Int(count) && port.statistics.rightsOutstanding == 0 },
                      "\(port.statistics.rightsOutstanding) rights still outstanding")
        // The owner loop's last answers are handed to it as control actions: one pass sends them.
        try thread.loop.performAndWait {}
        try thread.loop.performAndWait {}
        var answers: [UInt64: [WireMessage]] = [:]
        for message in try drain(dealer) { answers[message.correlationID, default: []].append(message) }

        for id in 1...count {
            let got = answers[id] ?? []
            XCTAssertLessThanOrEqual(got.count, 1, "request \(id) answered \(got.count) times")
            guard let answer = got.first else {
                XCTAssertEqual(id % 3, 0, "request \(id), never cancelled, got no answer")
                continue
            }
            switch Self.choice(id) {
            case 0:
                XCTAssertEqual(answer.kind, .reply)
                XCTAssertEqual(answer.components, [.data(Array("r\(id)".utf8))])
            case 1: XCTAssertEqual(answer.kind, .failure)
            default: XCTAssertEqual(answer.kind, .noReply)
            }
            XCTAssertEqual(answer.messageID, Int32(id), "an answer carries its request's id")
        }
        let cancelled = port.statistics.requestsCancelled
        let unanswered = (1...count).filter { answers[$0] == nil }.count
        XCTAssertLessThanOrEqual(unanswered, cancelled, "only a cancelled request goes unanswered")
        pool.stop()
        thread.stop()
    }

    func testAPortInvalidatedWhileItsRightsAreAnsweredFromWorkersLeavesNoRightCountedAndNothingCrashes() throws {
        let pool = try WorkerPool(name: "race-close", count: 2)
        let (thread, port) = poolServer(pool)
        let dealer = try ZMQSocket(type: .dealer)
        try dealer.connect(port.remote.address.rawValue)
        for id in UInt64(1)...2000 {
            XCTAssertTrue(try dealer.send(LoopMessage(id: Int32(id)), as: .request, correlationID: id, dontWait: false))
        }
        XCTAssertTrue(waitUntil(within: .seconds(30)) { port.statistics.messagesReceived >= 500 })
        port.invalidate() // while the pool answers the first ones and the rest still arrive
        XCTAssertTrue(waitUntil(within: .seconds(30)) { port.statistics.rightsOutstanding == 0 },
                      "\(port.statistics.rightsOutstanding) rights still outstanding")
        try thread.loop.performAndWait {}
        var seen = Set<UInt64>()
        for message in try drain(dealer) {
            XCTAssertTrue(seen.insert(message.correlationID).inserted, "request \(message.correlationID) answered twice")
        }
        pool.stop()
        thread.stop()
    }
}
