import Atomics
import RunLoopSystem
import Glibc

/// A named port's life page: `<name>.life`, one page that its owner maps and holds a robust
/// lock in for as long as the port lives, taken by the port's owner thread. The kernel
/// releases that lock, marked owner-died, the moment the thread ends killed or crashed,
/// before it tears the process down: a watcher sleeping on the word (`PortLossSource`)
/// learns of the death then, where a pidfd turns readable only once the whole process is
/// unmapped, milliseconds later for a process of Swift's size. An owner that gives the
/// name back marks the page withdrawn first and wakes the watchers, so that they tell an
/// invalidation from a death.
///
/// The page (docs/wire-format.md, "Where named ports live"): the lock at 0 (a glibc
/// `pthread_mutex_t`, process-shared and robust, whose first 32-bit word is the kernel's
/// robust futex word: the holder's thread id in bits 0–29, `FUTEX_OWNER_DIED` bit 30,
/// `FUTEX_WAITERS` bit 31), then at 64 the magic `RLKL`, at 68 the layout's version (1), at
/// 72 the state (1 live, 2 withdrawn) and at 76 the owner's pid, each 32 bits in the
/// machine's byte order (little-endian wherever RunLoopKit runs).
/// The owner writes it whole under a temporary name and renames it into place, so that a
/// watcher never maps a page half made; it never makes an existing page shorter (a mapping
/// of a file cut short faults).
final class NameLife: @unchecked Sendable {
    static let size = 4096
    static let magic: UInt32 = 0x4C4B_4C52 // "RLKL"
    static let version: UInt32 = 1

    enum State: UInt32 {
        case live = 1
        case withdrawn = 2
    }

    let path: String
    /// The page, mapped shared; unmapped by `release` (when nothing can touch it any more).
    private let page: Page
    /// The process that made it: in a child it forks, `release` only unmaps that child's copy.
    private let processID: pid_t
    /// The owner thread, which holds the lock until `release`.
    private let holderThreadID: pid_t
    /// Serializes `withdraw` (an exit handler's, on any thread) with `release` (the owner
    /// thread's), which unmaps the page.
    private let access = Lock()

    /// The page's path beside the name's lock file (`<dir>/<name>.lock`): `<dir>/<name>.life`.
    static func path(besideLock lockPath: String) -> String {
        String(lockPath.dropLast(".lock".count)) + ".life"
    }

    /// Makes `<directory>/<name>.life` for the calling thread, the port's owner, and takes its
    /// lock. Called under the name's lock (`NameLock`), so no other owner writes it meanwhile.
    init(name: String, directory: String) throws(SystemCallError) {
        path = "\(directory)/\(name).life"
        processID = getpid()
        holderThreadID = Kernel.threadID()
        let building = path + ".new" // a killed owner's leftover goes here, the next owner's first
        _ = try? Kernel.unlink(building)
        let fd = try Kernel.open(building, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode: 0o600)
        defer { Kernel.close(fd) }
        do {
            try Kernel.setSize(fd, to: Self.size)
            page = Page(try Kernel.mapForReadingAndWriting(fd, count: Self.size))
        } catch {
            _ = try? Kernel.unlink(building)
            throw error
        }
        do {
            try Kernel.makeRobustLock(page.lock)
            try Kernel.takeRobustLock(page.lock)
        } catch {
            page.unmap()
            _ = try? Kernel.unlink(building)
            throw error
        }
        page.store(Self.magic, at: Page.magicOffset)
        page.store(Self.version, at: Page.versionOffset)
        page.store(UInt32(bitPattern: processID), at: Page.pidOffset)
        page.store(State.live.rawValue, at: Page.stateOffset)
        do {
            try Kernel.rename(building, to: path)
        } catch {
            releaseLockAndUnmap()
            _ = try? Kernel.unlink(building)
            throw error
        }
    }

    /// Whether the calling process made it (it is not a child forked since).
    private var madeInThisProcess: Bool { processID == getpid() }

    /// Marks the page withdrawn and wakes its watchers: they report an invalidation, not a
    /// death, even if the process dies next. Any thread of the owner's process; nothing in a
    /// forked child (the name is its parent's).
    func withdraw() {
        access.withLock { markWithdrawn() }
    }

    private func markWithdrawn() {
        guard madeInThisProcess, page.isMapped else { return }
        page.store(State.withdrawn.rawValue, at: Page.stateOffset)
        Kernel.wakeSharedWord(page.word)
    }

    /// Gives the page back: withdrawn, its lock released by the owner thread, its file
    /// removed, its mapping unmapped. Off the owner thread (its thread ended before its
    /// port was closed), the kernel released the lock at the thread's end; while that thread
    /// still holds it, the page stays mapped, since the lock is on that thread's robust
    /// list until it ends. In a forked child, only the child's mapping goes.
    func release() {
        access.lock()
        defer { access.unlock() }
        guard page.isMapped else { return }
        guard madeInThisProcess else { return page.unmap() }
        markWithdrawn()
        _ = try? Kernel.unlink(path) // already gone: nothing to remove
        if Kernel.threadID() == holderThreadID {
            releaseLockAndUnmap()
        } else if page.load(Page.lockOffset) & Kernel.robustThreadMask != UInt32(bitPattern: holderThreadID) {
            page.unmap()
        }
    }

    private func releaseLockAndUnmap() {
        try? Kernel.releaseRobustLock(page.lock) // taken by this thread: cannot fail
        page.unmap()
    }

    deinit { release() }
}

extension NameLife {
    /// What a live page says of its owner.
    enum Reading: Equatable {
        /// Held by a live thread, whose lock word is `word`.
        case live(word: UInt32)
        /// The holder thread ended holding it: its process died (or the thread ended before
        /// its port was closed, which a port's teardown never lets happen).
        case ownerDied
        /// The owner gave the name back.
        case withdrawn
    }

    /// Maps the page at `path` for a watcher of the process `ownerPID`: nil when there is
    /// none (an owner that does not make one: an older RunLoopKit, a foreign peer), or it is
    /// not a page this layout describes, of this user, made by that process.
    static func watch(path: String, ownerPID: pid_t) -> Page? {
        guard let fd = try? Kernel.open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW) else { return nil }
        defer { Kernel.close(fd) }
        guard isPage(fd), let mapping = try? Kernel.mapForReadingAndWriting(fd, count: Self.size) else { return nil }
        let page = Page(mapping)
        guard page.load(Page.magicOffset) == Self.magic, page.load(Page.versionOffset) == Self.version,
              page.load(Page.pidOffset) == UInt32(bitPattern: ownerPID) else {
            page.unmap()
            return nil
        }
        return page
    }
}

extension NameLife {
    /// What the page at `path` says of `ownerPID` now, read once without mapping it (a
    /// mapping's undoing costs every thread of this process a TLB flush): nil when there is
    /// no such page of that process.
    static func reading(path: String, ownerPID: pid_t) -> Reading? {
        guard let fd = try? Kernel.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) else { return nil }
        defer { Kernel.close(fd) }
        guard isPage(fd) else { return nil }
        var fields = [UInt32](repeating: 0, count: 20) // bytes 0-79
        let count = fields.withUnsafeMutableBytes { (try? Kernel.pread(fd, into: $0, at: 0)) ?? 0 }
        guard count == 80, fields[Page.magicOffset / 4] == magic, fields[Page.versionOffset / 4] == version,
              fields[Page.pidOffset / 4] == UInt32(bitPattern: ownerPID) else { return nil }
        return Reading(state: fields[Page.stateOffset / 4], word: fields[Page.lockOffset / 4])
    }

    /// Whether `fd` is a page this layout can be: a regular file of this user's, one page long.
    private static func isPage(_ fd: Int32) -> Bool {
        guard let status = try? Kernel.status(fd) else { return false }
        return status.st_mode & S_IFMT == S_IFREG && status.st_size == size && status.st_uid == geteuid()
    }
}

extension NameLife.Reading {
    /// What a page's state and lock word say.
    init(state: UInt32, word: UInt32) {
        if state != NameLife.State.live.rawValue {
            self = .withdrawn
        } else if word & Kernel.robustOwnerDied != 0 {
            self = .ownerDied
        } else if word & Kernel.robustThreadMask == 0 {
            // Released without a withdrawal: only a process that broke the protocol does it.
            self = .withdrawn
        } else {
            self = .live(word: word)
        }
    }
}

extension NameLife {
    /// A life page mapped shared: the owner's, or a watcher's.
    final class Page: @unchecked Sendable {
        static let lockOffset = 0
        static let magicOffset = 64
        static let versionOffset = 68
        static let stateOffset = 72
        static let pidOffset = 76

        /// Nil once unmapped; set by the one thread that maps or unmaps it.
        private var mapping: UnsafeMutableRawBufferPointer?

        init(_ mapping: UnsafeMutableRawBufferPointer) { self.mapping = mapping }

        var isMapped: Bool { mapping != nil }

        /// The robust lock.
        var lock: UnsafeMutablePointer<pthread_mutex_t> {
            mapping!.baseAddress!.assumingMemoryBound(to: pthread_mutex_t.self)
        }

        /// The lock's futex word.
        var word: UnsafeMutablePointer<UInt32> {
            mapping!.baseAddress!.assumingMemoryBound(to: UInt32.self)
        }

        func load(_ offset: Int) -> UInt32 {
            atomic(offset).load(ordering: .acquiring)
        }

        func store(_ value: UInt32, at offset: Int) {
            atomic(offset).store(value, ordering: .releasing)
        }

        /// Sets `bits` in the word at `offset` if it still holds `expected`; true if it did.
        func setBits(_ bits: UInt32, at offset: Int, ifStill expected: UInt32) -> Bool {
            atomic(offset).compareExchange(expected: expected, desired: expected | bits,
                                           ordering: .acquiringAndReleasing).exchanged
        }

        /// What the page says now.
        var reading: Reading {
            let state = load(Self.stateOffset) // first: a withdrawal is marked before the release
            return Reading(state: state, word: load(Self.lockOffset))
        }

        func unmap() {
            guard let mapping else { return }
            self.mapping = nil
            try? Kernel.unmap(UnsafeRawBufferPointer(mapping))
        }

        private func atomic(_ offset: Int) -> UnsafeAtomic<UInt32> {
            UnsafeAtomic(at: (mapping!.baseAddress! + offset).assumingMemoryBound(to: UInt32.AtomicRepresentation.self))
        }
    }
}
