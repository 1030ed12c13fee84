/// A first-in first-out queue whose links live in its nodes (libuv's `queue.h`): appending
/// and removing any node are O(1), move no element and allocate nothing, and a node knows
/// whether it is queued (`queueLinks.isQueued`), so that queueing never searches.
///
/// The queue does not retain its nodes: whoever queues a node keeps it alive until it is
/// removed (`remove`, `removeAll`): hot-path: unretained-links (docs/optimization-tips.md).
/// A node is in at most one queue at a time: the links are one pair. Not thread-safe: one
/// thread's, like its owner.
struct IntrusiveQueue<Node: IntrusiveQueueNode> {
    private var head: Unmanaged<Node>?
    private var tail: Unmanaged<Node>?

    init() {}

    var isEmpty: Bool { head == nil }

    /// The node queued longest.
    var first: Node? { head?.takeUnretainedValue() }

    /// The node queued right after `node`, which must be queued here.
    func next(after node: Node) -> Node? {
        node.queueLinks.next?.takeUnretainedValue()
    }

    /// The first node, from the front, that satisfies `predicate`.
    @inline(__always)
    func first(where predicate: (Node) -> Bool) -> Node? {
        var queued = head
        while let current = queued {
            let node = current.takeUnretainedValue()
            if predicate(node) { return node }
            queued = node.queueLinks.next
        }
        return nil
    }

    /// Queues `node` at the back; false if it was queued already (it stays where it is).
    @discardableResult
    mutating func append(_ node: Node) -> Bool {
        guard !node.queueLinks.isQueued else { return false }
        let queued = Unmanaged.passUnretained(node)
        node.queueLinks = IntrusiveQueueLinks(isQueued: true, previous: tail, next: nil)
        if let tail {
            tail._withUnsafeGuaranteedRef { $0.queueLinks.next = queued }
        } else {
            head = queued
        }
        tail = queued
        return true
    }

    /// Takes `node` out of the queue, wherever it is; false if it was not queued.
    @discardableResult
    mutating func remove(_ node: Node) -> Bool {
        let links = node.queueLinks
        guard links.isQueued else { return false }
        if let previous = links.previous {
            previous._withUnsafeGuaranteedRef { $0.queueLinks.next = links.next }
        } else {
            head = links.next
        }
        if let next = links.next {
            next._withUnsafeGuaranteedRef { $0.queueLinks.previous = links.previous }
        } else {
            tail = links.previous
        }
        node.queueLinks = IntrusiveQueueLinks()
        return true
    }

    /// Takes every node out, each left unqueued.
    mutating func removeAll() {
        var queued = head
        head = nil
        tail = nil
        while let current = queued {
            queued = current._withUnsafeGuaranteedRef { node in
                let next = node.queueLinks.next
                node.queueLinks = IntrusiveQueueLinks()
                return next
            }
        }
    }
}

/// A class whose instances an `IntrusiveQueue` links through their `queueLinks`, a stored
/// property that only the queue changes.
protocol IntrusiveQueueNode: AnyObject {
    var queueLinks: IntrusiveQueueLinks<Self> { get set }
}

/// A node's place in its `IntrusiveQueue`: unqueued as made (`init()`).
struct IntrusiveQueueLinks<Node: AnyObject> {
    /// Whether the node is in a queue.
    private(set) var isQueued: Bool
    fileprivate var previous: Unmanaged<Node>?
    fileprivate var next: Unmanaged<Node>?

    init() {
        isQueued = false
    }

    fileprivate init(isQueued: Bool, previous: Unmanaged<Node>?, next: Unmanaged<Node>?) {
        self.isQueued = isQueued
        self.previous = previous
        self.next = next
    }
}
