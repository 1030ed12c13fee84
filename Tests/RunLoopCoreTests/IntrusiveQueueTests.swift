@testable import RunLoopCore
import XCTest

/// The ready queue's type: first in, first out; any node removed in O(1) with the rest left
/// in order; a node knows whether it is queued; a node queued twice is queued once.
final class IntrusiveQueueTests: XCTestCase {
    private final class Node: IntrusiveQueueNode {
        let value: Int
        var queueLinks = IntrusiveQueueLinks<Node>()
        init(_ value: Int) { self.value = value }
    }

    private func values(_ queue: IntrusiveQueue<Node>) -> [Int] {
        var values: [Int] = []
        var node = queue.first
        while let current = node {
            values.append(current.value)
            node = queue.next(after: current)
        }
        return values
    }

    func testNodesComeOutInTheOrderTheyWereAppended() {
        let nodes = (0..<5).map(Node.init)
        var queue = IntrusiveQueue<Node>()
        XCTAssertTrue(queue.isEmpty)
        XCTAssertNil(queue.first)
        for node in nodes { XCTAssertTrue(queue.append(node)) }
        XCTAssertFalse(queue.isEmpty)
        XCTAssertEqual(values(queue), [0, 1, 2, 3, 4])
        XCTAssertTrue(nodes.allSatisfy(\.queueLinks.isQueued))
    }

    func testAppendingAQueuedNodeAgainLeavesItWhereItIs() {
        let nodes = (0..<3).map(Node.init)
        var queue = IntrusiveQueue<Node>()
        for node in nodes { queue.append(node) }
        XCTAssertFalse(queue.append(nodes[0]))
        XCTAssertEqual(values(queue), [0, 1, 2])
    }

    func testRemovingTheFrontMiddleOrBackLeavesTheRestInOrderAndTheNodeUnqueued() {
        for removed in 0..<4 {
            let nodes = (0..<4).map(Node.init)
            var queue = IntrusiveQueue<Node>()
            for node in nodes { queue.append(node) }
            XCTAssertTrue(queue.remove(nodes[removed]))
            XCTAssertFalse(nodes[removed].queueLinks.isQueued)
            XCTAssertEqual(values(queue), [0, 1, 2, 3].filter { $0 != removed })
            queue.append(nodes[removed])
            XCTAssertEqual(values(queue), [0, 1, 2, 3].filter { $0 != removed } + [removed], "appended again: at the back")
        }
    }

    func testRemovingANodeThatIsNotQueuedChangesNothing() {
        let (queued, other) = (Node(1), Node(2))
        var queue = IntrusiveQueue<Node>()
        XCTAssertFalse(queue.remove(other))
        queue.append(queued)
        XCTAssertFalse(queue.remove(other))
        XCTAssertTrue(queue.remove(queued))
        XCTAssertFalse(queue.remove(queued), "removed once")
        XCTAssertTrue(queue.isEmpty)
        XCTAssertNil(queue.first)
        queue.append(other)
        XCTAssertEqual(values(queue), [2], "the last removal left head and tail empty")
    }

    func testRemovingAllLeavesEveryNodeUnqueuedAndTheQueueUsable() {
        let nodes = (0..<4).map(Node.init)
        var queue = IntrusiveQueue<Node>()
        for node in nodes { queue.append(node) }
        queue.removeAll()
        XCTAssertTrue(queue.isEmpty)
        XCTAssertFalse(nodes.contains { $0.queueLinks.isQueued })
        queue.append(nodes[2])
        queue.append(nodes[0])
        XCTAssertEqual(values(queue), [2, 0])
    }

    func testTheFirstNodeWhereAPredicateHoldsIsFoundFromTheFront() {
        let nodes = (0..<6).map(Node.init)
        var queue = IntrusiveQueue<Node>()
        for node in nodes.reversed() { queue.append(node) }
        XCTAssertEqual(queue.first { $0.value % 2 == 1 }?.value, 5)
        XCTAssertEqual(queue.first { $0.value < 3 }?.value, 2)
        XCTAssertNil(queue.first { $0.value > 10 })
    }

    /// Random appends and removals, checked after each against an array doing the same.
    func testAnyMixOfAppendsAndRemovalsKeepsTheOrderAnArrayWould() {
        continueAfterFailure = false // one report, not thousands
        let nodes = (0..<16).map(Node.init)
        var queue = IntrusiveQueue<Node>()
        var model: [Int] = []
        var generator = SplitMix64(seed: 41)
        for _ in 0..<10_000 {
            let node = nodes[Int.random(in: 0..<nodes.count, using: &generator)]
            if Bool.random(using: &generator) {
                XCTAssertEqual(queue.append(node), !model.contains(node.value))
                if !model.contains(node.value) { model.append(node.value) }
            } else {
                XCTAssertEqual(queue.remove(node), model.contains(node.value))
                model.removeAll { $0 == node.value }
            }
            XCTAssertEqual(values(queue), model)
            XCTAssertEqual(queue.isEmpty, model.isEmpty)
            for other in nodes where other.queueLinks.isQueued != model.contains(other.value) {
                XCTFail("node \(other.value) says queued: \(other.queueLinks.isQueued)")
            }
        }
    }
}

/// A seeded generator, so that the random test is the same every run.
private struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
