import Glibc
import RunLoopSystem

/// The receiving side of a shared ring (`SharedRingLayout`): a port maps the ring a sender
/// gave it on its side channel, after checking that it cannot fault or grow under the
/// port (a memory file sealed against shrinking, of the size its header says, within
/// `maxCapacity`); the data read-only, the header page readable and writable. A note's
/// bytes are read where they lie (`bytes(of:)`, checked against the ring's bounds), and
/// given back once the handler is done with them (`giveBack(through:)`).
///
/// What a hostile sender can do: write the bytes while the port reads them (it owns the
/// memory: a well-behaved one never writes what it has not got back), or name bytes of
/// its own ring out of order; never make the port read outside the ring or map without bound.
///
/// Thread safety: none; the port's loop thread's.
final class MappedRing {
    /// Why a sender's ring was refused.
    enum Refusal: Error, Equatable {
        /// Not a memory file sealed against shrinking (it could fault the port's reads).
        case notSealed
        /// Its header or size is not a ring's (`SharedRingLayout`), or it is too large.
        case badLayout
        /// A kernel call failed (`fstat`, `mmap`).
        case system(SystemCallError)
    }

    let capacity: Int
    /// The whole file, read-only: the data starts at `SharedRingLayout.headerSize`.
    private let data: UnsafeRawBufferPointer
    /// The header page, readable and writable, for `tail` and `waitingFor`.
    private let headerPage: UnsafeMutableRawBufferPointer
    private let header: SharedRingHeader
    /// The highest position given back: the tail, as this side knows it.
    private var givenBack: UInt64 = 0

    /// Maps the ring in `fd` (which stays the caller's), or refuses it.
    init(checking fd: Int32) throws(Refusal) {
        guard let seals = try? Kernel.seals(of: fd), seals.contains(.shrink) else { throw .notSealed }
        let size: Int
        do {
            size = Int(try Kernel.status(fd).st_size)
        } catch {
            throw .system(error)
        }
        guard size > SharedRingLayout.headerSize, size <= SharedRingLayout.headerSize + SharedRingLayout.maxCapacity else {
            throw .badLayout
        }
        let headerPage: UnsafeMutableRawBufferPointer
        do {
            headerPage = try Kernel.mapForReadingAndWriting(fd, count: SharedRingLayout.headerSize)
        } catch {
            throw .system(error)
        }
        let header = SharedRingHeader(base: headerPage.baseAddress.unsafelyUnwrapped)
        let capacity = header.capacity
        guard header.hasMagicAndVersion, capacity > 0, capacity % 4096 == 0,
              capacity == UInt64(size - SharedRingLayout.headerSize) else {
            try? Kernel.unmap(UnsafeRawBufferPointer(headerPage))
            throw .badLayout
        }
        do {
            data = try Kernel.mapForReading(fd, count: size)
        } catch {
            try? Kernel.unmap(UnsafeRawBufferPointer(headerPage))
            throw .system(error)
        }
        (self.headerPage, self.header, self.capacity) = (headerPage, header, Int(capacity))
        givenBack = header.tail.load(ordering: .acquiring)
    }

    deinit {
        try? Kernel.unmap(data)
        try? Kernel.unmap(UnsafeRawBufferPointer(headerPage))
    }

    /// The bytes `note` names, where they lie; nil for bytes outside the ring (a note no
    /// sender of this ring would write), or none.
    func bytes(of note: SharedNote) -> UnsafeRawBufferPointer? {
        guard note.length > 0, note.length <= UInt64(capacity) else { return nil }
        let offset = Int(note.start % UInt64(capacity))
        guard offset + Int(note.length) <= capacity else { return nil }
        return UnsafeRawBufferPointer(rebasing: data[SharedRingLayout.headerSize + offset
                                                    ..< SharedRingLayout.headerSize + offset + Int(note.length)])
    }

    /// Gives back every position below `end` (a note's start plus its length): the sender
    /// may write there again. Notes are read in their order, so the tail only moves
    /// forward; the sender is woken once the tail reached what it waits for (`waitingFor`,
    /// which it alone clears).
    func giveBack(through end: UInt64) {
        guard end > givenBack else { return }
        givenBack = end
        header.tail.store(end, ordering: .sequentiallyConsistent)
        let waitingFor = header.waitingFor.load(ordering: .sequentiallyConsistent)
        if waitingFor != 0, end >= waitingFor { Kernel.wakeSharedWord(header.tailWord) }
    }
}
