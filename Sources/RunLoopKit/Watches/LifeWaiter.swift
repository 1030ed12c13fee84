import Glibc
import RunLoopCore
import RunLoopSystem
import Synchronization

/// A watch of one owner's life page (`NameLife`): the `LifeWaiter` thread sleeps on its
/// lock word, and once the page says the owner died or withdrew, records which and signals
/// `told`, whose loop then tells the `PortLossSource`. The waiter owns the page from
/// `LifeWaiter.add` on, and unmaps it once the watch is done or cancelled.
final class LifeWatch: @unchecked Sendable {
    fileprivate let page: NameLife.Page
    private let told: InputSource
    /// 0 while the owner lives, then `Outcome`'s raw value; set once, by the waiter thread.
    private let outcome = Atomic<UInt8>(0)
    /// Set by `cancel()`, any thread; the waiter drops the watch at its next turn.
    fileprivate let cancelled = Atomic<Bool>(false)
    /// The group serving it; set under `LifeWaiter`'s lock when added.
    fileprivate var group: LifeWaiter.Group?

    private enum Outcome: UInt8 {
        case ownerDied = 1
        case withdrawn = 2
    }

    init(page: NameLife.Page, told: InputSource) {
        self.page = page
        self.told = told
    }

    /// What the page said once it stopped being live; nil while it is. Any thread.
    var loss: PortLoss? {
        switch Outcome(rawValue: outcome.load(ordering: .acquiring)) {
        case .ownerDied: .ownerDied
        case .withdrawn: .portInvalidated
        case nil: nil
        }
    }

    /// Stops watching; the waiter unmaps the page. Any thread.
    func cancel() { LifeWaiter.shared.cancel(self) }

    fileprivate var isDone: Bool { cancelled.load(ordering: .relaxed) || outcome.load(ordering: .relaxed) != 0 }

    /// The word to sleep on, with `FUTEX_WAITERS` set in it so that the holder's release
    /// (the kernel's at its death) wakes a sleeper; nil once the page is no longer live,
    /// which it then reports.
    fileprivate func armed() -> Kernel.WaitedWord? {
        while true {
            switch page.reading {
            case .ownerDied:
                report(.ownerDied)
                return nil
            case .withdrawn:
                report(.withdrawn)
                return nil
            case .live(let word):
                if word & Kernel.robustWaiters != 0 { return Kernel.waitedWord(page.word, while: word, shared: true) }
                if page.setBits(Kernel.robustWaiters, at: NameLife.Page.lockOffset, ifStill: word) {
                    return Kernel.waitedWord(page.word, while: word | Kernel.robustWaiters, shared: true)
                }
            }
        }
    }

    /// Records the outcome and signals the source. The kernel and glibc wake a single
    /// sleeper of a robust lock: this passes the wake-up on to every other watcher of the
    /// page, in this process or another.
    private func report(_ what: Outcome) {
        outcome.store(what.rawValue, ordering: .releasing)
        Kernel.wakeSharedWord(page.word)
        told.signalAndWake()
    }

    /// Unmaps the page: the waiter thread's, once the watch is done.
    fileprivate func unmap() { page.unmap() }
}

/// The threads that sleep on the life words of watched owners, so that a loop learns of a
/// death the moment the kernel marks it (`NameLife`), long before the dead process's pidfd
/// turns readable. A loop cannot sleep on a futex in its poll set, so one thread sleeps on
/// up to 127 of them at once (`futex_waitv(2)`, with a word of its own to be told of new and
/// cancelled watches) and signals each watch's source as its owner goes. A thread runs only
/// while it has watches, and exits with its last: an idle process has none.
final class LifeWaiter: @unchecked Sendable {
    static let shared = LifeWaiter()

    /// The words a group's thread sleeps on besides its own.
    static let watchesPerGroup = Kernel.maximumWaitedWords - 1

    /// Whether the kernel has `futex_waitv` (Linux 5.16) and lets this process use it
    /// (a seccomp filter may not): without it, a `PortLossSource` has only the pidfd.
    static let isAvailable: Bool = {
        var changed: UInt32 = 1
        var word = Kernel.waitedWord(&changed, while: 0, shared: false)
        do {
            _ = try withUnsafeMutablePointer(to: &word) { (pointer) throws(SystemCallError) in
                try Kernel.waitOnWords(UnsafeMutableBufferPointer(start: pointer, count: 1), before: .distantFuture)
            }
            return true
        } catch {
            return false
        }
    }()

    /// A thread's watches, and the word it sleeps on to be told of a change to them.
    final class Group: @unchecked Sendable {
        /// The process whose thread serves it: a child forked since has no such thread.
        fileprivate let processID = getpid()
        /// Protected by the waiter's lock.
        fileprivate var watches: [LifeWatch] = []
        /// Bumped under the waiter's lock at every change to `watches`, then woken.
        fileprivate let changes = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
        init() { changes.initialize(to: 0) }
        deinit { changes.deallocate() }
    }

    private let lock = Lock()
    /// The groups whose thread runs; protected by lock.
    private var groups: [Group] = []
    /// How many groups' threads have ended, bumped under lock and woken as each ends.
    private let ended = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)

    private init() { ended.initialize(to: 0) }

    /// Hands `watch` to a thread, starting one if every running group is full. Throws when
    /// no thread can be started (the watch then was not taken: its page is the caller's).
    func add(_ watch: LifeWatch) throws(SystemCallError) {
        let group: Group
        lock.lock()
        let process = getpid()
        groups.removeAll { $0.processID != process } // a parent's, whose threads a forked child lacks
        if let open = groups.first(where: { $0.watches.count < Self.watchesPerGroup }) {
            group = open
        } else {
            group = Group()
            // Its thread takes the lock first thing, so it finds the watch added below.
            do {
                try NativeThread.start(name: "runloopkit.life") { [self] in serve(group) }.detach()
            } catch {
                lock.unlock()
                throw error
            }
            groups.append(group)
        }
        group.watches.append(watch)
        watch.group = group
        group.changes.pointee &+= 1
        lock.unlock()
        Kernel.wakeWord(group.changes)
    }

    /// How many threads serve watches now (tests).
    var _threads: Int { lock.withLock { groups.count } }

    /// Waits until no thread serves a watch, or `deadline` passes; false then (tests).
    func _waitUntilNoThread(before deadline: Deadline) -> Bool {
        while true {
            let (threads, seen) = lock.withLock { (groups.count, ended.pointee) }
            if threads == 0 { return true }
            guard (try? Kernel.waitOnWord(ended, while: seen, before: deadline)) ?? true else { return false }
        }
    }

    fileprivate func cancel(_ watch: LifeWatch) {
        lock.lock()
        watch.cancelled.store(true, ordering: .relaxed)
        guard let group = watch.group else { return lock.unlock() }
        group.changes.pointee &+= 1
        lock.unlock()
        Kernel.wakeWord(group.changes)
    }

    /// The group's thread: sleeps on its watches' words and its own until one changes,
    /// reports each watch whose owner went, drops the done ones, and ends with the last.
    private func serve(_ group: Group) {
        var words: [Kernel.WaitedWord] = []
        words.reserveCapacity(Kernel.maximumWaitedWords)
        var done: [LifeWatch] = []
        while true {
            lock.lock()
            let changes = group.changes.pointee
            group.watches.removeAll { watch in
                guard watch.isDone else { return false }
                done.append(watch)
                return true
            }
            let watches = group.watches
            if watches.isEmpty {
                groups.removeAll { $0 === group }
                ended.pointee &+= 1
            }
            lock.unlock()
            for watch in done { watch.unmap() }
            done.removeAll(keepingCapacity: true)
            guard !watches.isEmpty else {
                Kernel.wakeWord(ended, all: true)
                return
            }

            words.removeAll(keepingCapacity: true)
            words.append(Kernel.waitedWord(group.changes, while: changes, shared: false))
            var reported = false
            for watch in watches {
                if let word = watch.armed() { words.append(word) } else { reported = true }
            }
            if reported { continue } // drop them before sleeping
            do {
                _ = try words.withUnsafeMutableBufferPointer { (buffer) throws(SystemCallError) -> Bool in
                    try Kernel.waitOnWords(buffer, before: .distantFuture)
                }
            } catch {
                // Never spin on a failing call: these watches keep their sources' pidfds.
                RunLoopKitLog.names.error("a life waiter stops", metadata: ["error": "\(error)"])
                lock.withLock { for watch in group.watches { watch.cancelled.store(true, ordering: .relaxed) } }
            }
        }
    }
}
