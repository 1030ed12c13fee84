import RunLoopSystem
import Glibc
import Synchronization

/// A thread's run loop (`CFRunLoop` / `NSRunLoop`): it runs in one mode at a time,
/// servicing that mode's input sources, port sources, timers and observers, and sleeps
/// in one poll set when there is nothing to do.
///
/// Every thread has at most one run loop, created on first use of `current` on that
/// thread and torn down when the thread exits. `main` is the main thread's.
///
/// Thread safety: `wakeUp()`, `stop()`, `isWaiting`, `perform(inModes:tag:_:)`,
/// `performAndWait`, `cancelPerformRequests` and the `invalidate()` of items may be
/// called from any thread. Everything else must be called on the loop's own thread,
/// and checks that it is.
public final class ThreadRunLoop: @unchecked Sendable {
    enum Lifecycle {
        case open
        /// The thread exited: no more runs, perform requests fail.
        case tornDown
    }

    /// A cross-thread request for the loop's thread, such as finishing an invalidation.
    package typealias ControlAction = @Sendable (ThreadRunLoop) -> Void

    public let isMain: Bool
    package let poller: Poller

    // Loop thread only, each access short; see architecture.md, exclusivity checks.
    @exclusivity(unchecked) var modes: [LoopMode: ModeItems] = [:]
    /// The items of the mode run last: most runs are in the same mode as the one before,
    /// and a mode's items live until teardown, so this spares hashing the mode's name.
    @exclusivity(unchecked) var lastRunItems: Unmanaged<ModeItems>?
    /// The common modes: `.default` and those added with `addCommonMode(_:)`; the set only
    /// grows. (A perform pass relies on it: it counts `.default` as common without hashing.)
    @exclusivity(unchecked) public internal(set) var commonModes = ThreadRunLoop.defaultCommonModes
    /// Every loop's common modes at first, shared: a loop copies the set only when it adds a
    /// common mode, so making a loop hashes no mode's name.
    private static let defaultCommonModes: Set<LoopMode> = [.default]
    let commonItems = ModeItems(mode: .common)
    /// The items of the runs in progress, outermost first, unretained: each run holds its
    /// own until it pops them. (Not the modes: a mode's name, pushed and popped at every
    /// run, was a retain and a release of its string.)
    @exclusivity(unchecked) var runStack: [Unmanaged<ModeItems>] = []
    @exclusivity(unchecked) var ports = PortSourceTable()
    /// Every descriptor in the poll set (ports', descriptor sources', the main queue's).
    @exclusivity(unchecked) var descriptors = DescriptorTable()
    /// Set while the main loop drains Dispatch's main queue, so that a nested run does not. Loop thread only.
    var isDrainingMainQueue = false
    /// What was created on this thread and must close with it (ports), closed at teardown
    /// if still open. Loop thread only.
    var ownedResources: [ObjectIdentifier: WeakOwnedResource] = [:]
    @exclusivity(unchecked) var instruments = LoopInstruments()

    /// Protects `lifecycle`, `performQueue`, `delayedRequests`, `performBatches` and `controlQueue`.
    let queueLock = Lock()
    /// Written only on the loop's thread, under queueLock (`tearDown`); read there without
    /// it (no other thread writes it), and with it from any other thread.
    // Unchecked here and below: under queueLock, each access short, read on every run and
    // perform; see architecture.md, exclusivity checks.
    @exclusivity(unchecked) var lifecycle = Lifecycle.open
    @exclusivity(unchecked) var performQueue: [PerformRequest] = [] // protected by queueLock
    var delayedRequests: [PerformRequest] = [] // protected by queueLock
    /// Delayed performs handed over from other threads, until scheduled. Its own lock.
    let delayedHandOver = DelayedHandOver()
    /// Requests taken from `performQueue` by the passes in progress (a nested run's after
    /// its outer one's), until run: still cancellable. Protected by queueLock.
    @exclusivity(unchecked) var performBatches: [PerformRequest] = []
    @exclusivity(unchecked) var controlQueue: [ControlAction] = [] // protected by queueLock
    /// Entries in `performQueue`, so that an empty queue costs no lock.
    let queuedCount = Atomic<Int>(0)
    /// Entries in `controlQueue`, counted apart from `queuedCount`: a pass that finds a
    /// perform request queued looks at the control queue only if it holds something too.
    let queuedControlCount = Atomic<Int>(0)

    /// Set by `stop()`, consumed by the innermost run. Atomic.
    let stopRequested = Atomic<Bool>(false)

    private init(isMain: Bool) {
        self.isMain = isMain
        poller = Poller() // its poll set, if any, comes with the first port
    }

    // MARK: - Per-thread loops

    /// The calling thread's run loop, created on first use.
    public static var current: ThreadRunLoop {
        if let pointer = pthread_getspecific(ThreadRunLoop.threadKey) {
            return Unmanaged<ThreadRunLoop>.fromOpaque(pointer).takeUnretainedValue()
        }
        let loop = isMainThread ? main : ThreadRunLoop(isMain: false)
        loop.bindToCallingThread()
        return loop
    }

    /// A loop for a thread that does not run yet: made on the creating thread, it takes
    /// perform requests and wake-ups at once (they wait in its queue), and becomes the new
    /// thread's loop when that thread calls `adoptOnCallingThread()`. Until then it has no
    /// owner thread: `isOwnerThread` is false everywhere. Any thread.
    ///
    /// A worker is created this way so that its `init` need not wait for its thread.
    package static func makeForAdoption() -> ThreadRunLoop { ThreadRunLoop(isMain: false) }

    /// Makes this loop, from `makeForAdoption()`, the calling thread's loop: `current` there,
    /// owned by it, and torn down when it exits. Once, on a thread that has no loop yet.
    package func adoptOnCallingThread() {
        precondition(!isMain, "the main thread's loop cannot be adopted")
        precondition(pthread_getspecific(ThreadRunLoop.threadKey) == nil, "the thread already has a run loop")
        bindToCallingThread()
    }

    /// Binds the loop to the calling thread as its `current` (the thread-local key holds a
    /// reference until the thread exits and the key's destructor tears the loop down).
    private func bindToCallingThread() {
        pthread_setspecific(ThreadRunLoop.threadKey, Unmanaged.passRetained(self).toOpaque())
        // The loop's thread gets its 1 µs timer slack from the poller, before its first timed sleep.
    }

    /// The main thread's run loop, from any thread.
    public static var main: ThreadRunLoop {
        mainLoop.withLock { loop in
            if let loop { return loop }
            let created = ThreadRunLoop(isMain: true)
            loop = created
            return created
        }
    }

    private static let mainLoop = LockedValue<ThreadRunLoop?>(nil)

    /// The key of each thread's loop; its destructor tears the loop down on the exiting thread.
    private static let threadKey: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key) { pointer in
            guard let pointer else { return }
            Unmanaged<ThreadRunLoop>.fromOpaque(pointer).takeRetainedValue().tearDown()
        }
        precondition(rc == 0, "pthread_key_create failed: \(rc)")
        return key
    }()

    static var isMainThread: Bool { getpid() == Kernel.threadID() }

    /// Whether the calling thread is this loop's thread.
    public var isOwnerThread: Bool {
        if let pointer = pthread_getspecific(ThreadRunLoop.threadKey) {
            return pointer == Unmanaged.passUnretained(self).toOpaque()
        }
        return isMain && ThreadRunLoop.isMainThread && ThreadRunLoop.current === self
    }

    package func assertOwnerThread(_ function: StaticString = #function) {
        precondition(isOwnerThread, "ThreadRunLoop.\(function) must be called on the loop's own thread")
    }

    // MARK: - Cross-thread controls

    /// Wakes the loop if it is sleeping, or makes its next sleep return at once
    /// (`CFRunLoopWakeUp`). Any thread.
    public func wakeUp() { poller.wake() }

    /// Ends the innermost run of the loop, which returns `.stopped` (`CFRunLoopStop`).
    /// A stop requested while the loop is not running ends its next run. Any thread.
    public func stop() {
        stopRequested.store(true, ordering: .releasing)
        wakeUp()
    }

    /// Whether the loop's thread is asleep in the poll set (`CFRunLoopIsWaiting`). Any thread.
    public var isWaiting: Bool { poller.isSleeping }

    /// The mode of the innermost run, or nil when the loop is not running. Loop thread.
    public var currentMode: LoopMode? {
        assertOwnerThread()
        return runStack.last?.takeUnretainedValue().mode
    }

    /// Runs `action` on the loop's thread: now if called there, else at the loop's next
    /// pass, in every mode (the loop is woken for it). Returns false if the loop was torn
    /// down, so the action will never run. The channel for what must happen where the
    /// loop's items live: finishing an invalidation, a port's close, a stream's attach.
    @discardableResult
    package func runOnOwnerThread(_ action: @escaping ControlAction) -> Bool {
        if isOwnerThread {
            action(self)
            return true
        }
        let accepted = queueLock.withLock {
            guard lifecycle == .open else { return false }
            controlQueue.append(action)
            queuedControlCount.add(1, ordering: .releasing)
            return true
        }
        if accepted { wakeUp() }
        return accepted
    }

    /// Runs the cross-thread actions queued since the last pass. Loop thread.
    @inline(__always)
    func runControlActions() {
        guard queuedControlCount.load(ordering: .acquiring) > 0 else { return }
        runControlActionsNow()
    }

    private func runControlActionsNow() {
        let actions = queueLock.withLock {
            let taken = controlQueue
            controlQueue.removeAll()
            queuedControlCount.subtract(taken.count, ordering: .releasing)
            return taken
        }
        for action in actions { action(self) }
    }

    // MARK: - Teardown

    /// Called on the loop's thread as it exits: fails pending requests, removes every
    /// item (running cancel callbacks) and releases the closures that could hold cycles.
    func tearDown() {
        let (requests, actions) = queueLock.withLock {
            lifecycle = .tornDown
            defer {
                performQueue.removeAll()
                delayedRequests.removeAll()
                controlQueue.removeAll()
            }
            return (performQueue + delayedRequests, controlQueue)
        }
        for action in actions { action(self) }
        for request in requests { request.cancel() }
        for (_, items) in modes { removeAll(items) }
        removeAll(commonItems)
        ports.removeAll(descriptors: &descriptors, poller: poller)
        for source in descriptors.allSources { removeDescriptorSourceEverywhere(source) }
        closeOwnedResources()
        modes.removeAll()
        lastRunItems = nil
    }
}

/// Something created on a loop's thread that may not outlive the thread, such as a port
/// (its ZeroMQ socket never moves to another thread): the loop closes it at teardown if
/// it is still open.
package protocol LoopOwnedResource: AnyObject {
    /// Closes the resource on the loop's thread, as that thread exits.
    func closeAtLoopTeardown()
}

extension ThreadRunLoop {
    /// Remembers a resource created on this thread, so that teardown can close it. Loop thread only.
    package func adopt(_ resource: some LoopOwnedResource) {
        ownedResources[ObjectIdentifier(resource)] = WeakOwnedResource(resource)
    }

    /// Forgets a resource that closed itself. Loop thread only.
    package func disown(_ resource: some LoopOwnedResource) {
        ownedResources[ObjectIdentifier(resource)] = nil
    }

    /// Closes the resources created on this thread that are still open (teardown).
    private func closeOwnedResources() {
        let resources = ownedResources.values.compactMap(\.resource)
        ownedResources.removeAll()
        for resource in resources { resource.closeAtLoopTeardown() }
    }
}

struct WeakOwnedResource {
    weak var resource: (any LoopOwnedResource)?
    init(_ resource: any LoopOwnedResource) { self.resource = resource }
}

/// What the layers above the core read of a loop: introspection, the executor, workers.
extension ThreadRunLoop {
    /// Whether the loop's thread has exited (its teardown has begun). Any thread.
    package var isTornDown: Bool { queueLock.withLock { lifecycle == .tornDown } }

    /// The modes of the runs in progress, outermost first. Loop thread only.
    package var runningModes: [LoopMode] { runStack.map { $0.takeUnretainedValue().mode } }

    /// How many runs are in progress. Loop thread only.
    package var runDepth: Int { runStack.count }

    /// The items added to `.common`, and every mode that ever held an item, sorted by
    /// name. Loop thread only.
    package var itemsByMode: (common: ModeItems, modes: [ModeItems]) {
        (commonItems, modes.values.sorted { $0.mode.rawValue < $1.mode.rawValue })
    }

    /// Perform requests not yet run: queued from any thread, or delayed. Any thread.
    package var pendingPerformRequestCount: Int {
        queueLock.withLock {
            performQueue.count(where: { $0.state == .pending }) + delayedRequests.count(where: { $0.state == .pending })
        }
    }

    /// What the loop has done so far. Loop thread only.
    package var counters: LoopCounters { instruments.counters }

    /// Counts a message a port source dropped, on the loop and in metrics. Loop thread only.
    package func countDroppedMessage(_ reason: MessageDropReason) {
        instruments.messageDropped(reason)
    }

    /// Whether a port source is queued to be drained (it may hold a message), without
    /// asking its socket. Loop thread only.
    package func isQueuedAsReady(_ port: any PortBasedSource) -> Bool {
        ports.isQueuedAsReady(port)
    }
}
