@testable import RunLoopKit
import XCTest

/// A message stream's state, as pure transitions over a stand-in consumer: messages handed
/// over or buffered in order, the port paused once when the buffer fills and its return
/// asked for once when the consumer catches up, and the ends (the port's, the consumer's).
final class PortMessageBufferStateTests: XCTestCase {
    private typealias S = PortMessageBuffer<LoopMessage>.State<String>

    private func message(_ id: Int32) -> LoopMessage { LoopMessage(id: id) }

    private func taken(_ state: inout S, threshold: Int = 0) -> (Int32?, Bool) {
        let (take, resume) = state.take(orWait: nil, resumeThreshold: threshold)
        if case .message(let message) = take { return (message.id, resume) }
        return (nil, resume)
    }

    private func isWaiting(_ state: S, for consumer: String) -> Bool {
        if case .waiting(let waiter, _) = state { return waiter == consumer }
        return false
    }

    func testAWaitingConsumerIsHandedTheNextMessageAndNothingIsBuffered() {
        var state = S.open(MessageQueue<LoopMessage>(), iterated: false, .flowing)
        XCTAssertTrue(state.beginIteration())
        guard case (.wait, false) = state.take(orWait: "consumer", resumeThreshold: 0) else {
            return XCTFail("nothing buffered: the consumer waits")
        }
        XCTAssertTrue(isWaiting(state, for: "consumer"))
        guard case .handedOver("consumer") = state.accept(message(1), capacity: 4) else {
            return XCTFail("the waiting consumer gets the message")
        }
        XCTAssertEqual(state.bufferedCount, 0)
        XCTAssertTrue(state.isIterated)
    }

    func testMessagesAreBufferedInOrderAndTheFullBufferPausesThePortOnce() {
        var state = S.open(MessageQueue<LoopMessage>(), iterated: true, .flowing)
        guard case .buffered = state.accept(message(1), capacity: 2),
              case .bufferedAndFull = state.accept(message(2), capacity: 2),
              case .buffered = state.accept(message(3), capacity: 2) else {
            return XCTFail("the second message fills the buffer; paused once, later ones are kept")
        }
        XCTAssertEqual(state.bufferedCount, 3)
        XCTAssertTrue(taken(&state, threshold: 1) == (1, false), "2 left: above the threshold")
        XCTAssertTrue(taken(&state, threshold: 1) == (2, true), "1 left: ask for the port's return")
        XCTAssertTrue(taken(&state, threshold: 1) == (3, false), "asked once")
        state.resumed()
        guard case .buffered = state.accept(message(4), capacity: 2),
              case .bufferedAndFull = state.accept(message(5), capacity: 2) else {
            return XCTFail("back in its modes: the next full buffer pauses it again")
        }
    }

    func testAPauseEndsOnlyWhenThePortIsBackNotWhenItsReturnIsAsked() {
        var state = S.open(MessageQueue<LoopMessage>(), iterated: true, .flowing)
        _ = state.accept(message(1), capacity: 1)
        XCTAssertTrue(taken(&state) == (1, true))
        guard case .buffered = state.accept(message(2), capacity: 1) else {
            return XCTFail("the port is not back yet: no second pause")
        }
    }

    func testAFinishedPortResumesTheWaitingConsumerWithTheEnd() {
        var state = S.open(MessageQueue<LoopMessage>(), iterated: true, .flowing)
        _ = state.take(orWait: "consumer", resumeThreshold: 0)
        XCTAssertEqual(state.portFinished(), "consumer")
        XCTAssertNil(state.portFinished(), "once")
        guard case .refused = state.accept(message(1), capacity: 4),
              case (.end, false) = state.take(orWait: "again", resumeThreshold: 0) else {
            return XCTFail("a finished stream takes nothing and ends")
        }
    }

    func testAfterThePortFinishesTheConsumerStillGetsWhatWasBufferedThenTheEnd() {
        var state = S.open(MessageQueue<LoopMessage>(), iterated: false, .flowing)
        _ = state.accept(message(1), capacity: 4)
        XCTAssertNil(state.portFinished(), "no one waits while messages are buffered")
        XCTAssertTrue(state.beginIteration(), "a stream may be iterated after its port finished")
        XCTAssertTrue(taken(&state) == (1, false))
        guard case (.end, false) = state.take(orWait: "consumer", resumeThreshold: 0) else {
            return XCTFail("then the end, without waiting")
        }
        XCTAssertTrue(state.consumerStopped() == (nil, false), "nothing to detach from a finished port")
    }

    func testAStoppedConsumerDropsWhatIsBufferedAndDetachesOnce() {
        var state = S.open(MessageQueue<LoopMessage>(), iterated: true, .flowing)
        _ = state.accept(message(1), capacity: 4)
        XCTAssertTrue(state.consumerStopped() == (nil, true))
        XCTAssertEqual(state.bufferedCount, 0)
        XCTAssertTrue(state.consumerStopped() == (nil, false), "detached once")
        guard case .refused = state.accept(message(2), capacity: 4),
              case (.end, false) = state.take(orWait: nil, resumeThreshold: 0) else {
            return XCTFail("a stopped stream takes nothing and ends")
        }
        XCTAssertNil(state.portFinished())
    }

    func testAConsumerCancelledWhileWaitingIsResumedWithTheEnd() {
        var state = S.open(MessageQueue<LoopMessage>(), iterated: true, .flowing)
        _ = state.take(orWait: "consumer", resumeThreshold: 0)
        XCTAssertTrue(state.consumerStopped() == ("consumer", true))
    }

    func testOnlyTheFirstIteratorTakesTheStreamAndAReleasedStreamEndsOnlyIfNoneDid() {
        var state = S.open(MessageQueue<LoopMessage>(), iterated: false, .flowing)
        XCTAssertFalse(state.isIterated, "released now, the stream would end")
        XCTAssertTrue(state.beginIteration())
        XCTAssertFalse(state.beginIteration(), "a second iterator ends at once")
        XCTAssertTrue(state.isIterated)
        _ = state.take(orWait: "consumer", resumeThreshold: 0)
        XCTAssertFalse(state.beginIteration())
    }
}
