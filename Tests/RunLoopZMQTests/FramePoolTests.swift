import CFramePool
import Dispatch
import RunLoopSystem
import RunLoopTestSupport
import XCTest

/// The frame pool (CFramePool) on its own: classes, bounds, reuse, give-backs from other
/// threads and retirement while buffers are out. `ZMQSocketTests` covers it under libzmq.
final class FramePoolTests: XCTestCase {
    private let classes = 0..<Int32(RLK_FRAME_POOL_CLASSES)

    private func allocated(_ pool: OpaquePointer) -> [Int] { classes.map { rlk_frame_pool_allocated(pool, $0) } }
    private func free(_ pool: OpaquePointer) -> [Int] { classes.map { rlk_frame_pool_free(pool, $0) } }

    func testATakeComesFromTheSmallestClassThatFitsAlignedTo16Bytes() throws {
        let sizes = [(0, 0), (1, 0), (256, 0), (257, 1), (1024, 1), (1025, 2), (4096, 2), (4097, 3),
                     (16384, 3), (16385, 4), (65536, 4), (65537, -1), (Int.max, -1)]
        for (size, expected) in sizes {
            XCTAssertEqual(rlk_frame_pool_class_of(size), Int32(expected), "size \(size)")
        }
        XCTAssertEqual(classes.map { rlk_frame_pool_class_size($0) }, [256, 1024, 4096, 16384, 65536])
        XCTAssertEqual(classes.map { rlk_frame_pool_class_limit($0) }, [16384, 4096, 1024, 256, 64], "4 MiB each")

        let pool = try XCTUnwrap(rlk_frame_pool_create())
        defer { rlk_frame_pool_retire(pool) }
        var taken: [UnsafeMutableRawPointer] = []
        for size in [34, 256, 257, 5000, 65536] {
            let buffer = try XCTUnwrap(rlk_frame_pool_take(pool, size), "size \(size)")
            XCTAssertEqual(UInt(bitPattern: buffer) % 16, 0, "size \(size)")
            // The whole class is the caller's (AddressSanitizer checks the bounds).
            let classSize = rlk_frame_pool_class_size(rlk_frame_pool_class_of(size))
            buffer.initializeMemory(as: UInt8.self, repeating: 0xA5, count: classSize)
            taken.append(buffer)
        }
        XCTAssertNil(rlk_frame_pool_take(pool, 65537), "larger than every class: the caller falls back")
        XCTAssertEqual(allocated(pool), [2, 1, 0, 1, 1])
        XCTAssertEqual(free(pool), [0, 0, 0, 0, 0])
        for buffer in taken { rlk_frame_pool_give_back(buffer, UnsafeMutableRawPointer(pool)) }
        XCTAssertEqual(free(pool), [2, 1, 0, 1, 1])
    }

    func testABufferGivenBackIsTakenAgainSoASteadyStateAllocatesNothing() throws {
        let slotsBefore = rlk_frame_pool_live_slots()
        let pool = try XCTUnwrap(rlk_frame_pool_create())
        var first: UnsafeMutableRawPointer?
        for index in 0..<10_000 {
            let buffer = try XCTUnwrap(rlk_frame_pool_take(pool, 100))
            if first == nil { first = buffer }
            guard buffer == first else { return XCTFail("take \(index) did not reuse the one buffer") }
            buffer.storeBytes(of: UInt64(index), as: UInt64.self)
            rlk_frame_pool_give_back(buffer, UnsafeMutableRawPointer(pool))
        }
        XCTAssertEqual(allocated(pool), [1, 0, 0, 0, 0])
        XCTAssertEqual(free(pool), [1, 0, 0, 0, 0])
        XCTAssertEqual(rlk_frame_pool_live_slots(), slotsBefore + 1)
        rlk_frame_pool_retire(pool)
        XCTAssertEqual(rlk_frame_pool_live_slots(), slotsBefore)
    }

    func testAClassAtItsBoundGivesNilUntilABufferComesBack() throws {
        let pool = try XCTUnwrap(rlk_frame_pool_create())
        defer { rlk_frame_pool_retire(pool) }
        let limit = rlk_frame_pool_class_limit(4)
        let taken = try (0..<limit).map { _ in try XCTUnwrap(rlk_frame_pool_take(pool, 40_000)) }
        XCTAssertNil(rlk_frame_pool_take(pool, 40_000), "the 64 KiB class is at its bound")
        let small = try XCTUnwrap(rlk_frame_pool_take(pool, 100), "another class still serves")
        rlk_frame_pool_give_back(taken[7], UnsafeMutableRawPointer(pool))
        // Giving `taken` back below would give a buffer back twice if this took another.
        let again = rlk_frame_pool_take(pool, 65536)
        guard again == taken[7] else { return XCTFail("took \(String(describing: again)), not the buffer given back") }
        XCTAssertNil(rlk_frame_pool_take(pool, 40_000))
        XCTAssertEqual(allocated(pool), [1, 0, 0, 0, limit])
        for buffer in taken { rlk_frame_pool_give_back(buffer, UnsafeMutableRawPointer(pool)) }
        XCTAssertEqual(free(pool), [0, 0, 0, 0, limit], "the 100-byte buffer is still out")
        rlk_frame_pool_give_back(small, UnsafeMutableRawPointer(pool))
        XCTAssertEqual(free(pool), [1, 0, 0, 0, limit])
    }

    func testRetiringAPoolWithNoBufferOutFreesItAndItsSlotsAtOnce() throws {
        let (poolsBefore, slotsBefore) = (rlk_frame_pool_live_pools(), rlk_frame_pool_live_slots())
        let pool = try XCTUnwrap(rlk_frame_pool_create())
        let buffers = try [100, 2000, 30_000].map { try XCTUnwrap(rlk_frame_pool_take(pool, $0)) }
        for buffer in buffers { rlk_frame_pool_give_back(buffer, UnsafeMutableRawPointer(pool)) }
        XCTAssertEqual(rlk_frame_pool_live_pools(), poolsBefore + 1)
        XCTAssertEqual(rlk_frame_pool_live_slots(), slotsBefore + 3)
        rlk_frame_pool_retire(pool)
        XCTAssertEqual(rlk_frame_pool_live_pools(), poolsBefore)
        XCTAssertEqual(rlk_frame_pool_live_slots(), slotsBefore)
    }

    func testARetiredPoolIsFreedByTheLastBufferGivenBackOnAnotherThreadAndNotBefore() throws {
        let (poolsBefore, slotsBefore) = (rlk_frame_pool_live_pools(), rlk_frame_pool_live_slots())
        let pool = try XCTUnwrap(rlk_frame_pool_create())
        let buffers = try [100, 100, 5000].map { try XCTUnwrap(rlk_frame_pool_take(pool, $0)) }
        let free = try XCTUnwrap(rlk_frame_pool_take(pool, 300))
        rlk_frame_pool_give_back(free, UnsafeMutableRawPointer(pool)) // in the pool when it retires
        for (index, buffer) in buffers.enumerated() { buffer.storeBytes(of: UInt64(index), as: UInt64.self) }
        rlk_frame_pool_retire(pool)
        XCTAssertEqual(rlk_frame_pool_live_pools(), poolsBefore + 1, "three buffers are still out")
        XCTAssertEqual(rlk_frame_pool_live_slots(), slotsBefore + 3)

        // Given back one at a time by threads that are not the owner (as libzmq's I/O thread
        // or a receiver does), each joined before the counts are read.
        let (poolBits, bufferBits) = (UInt(bitPattern: pool), buffers.map { UInt(bitPattern: $0) })
        for (index, bits) in bufferBits.enumerated() {
            let read = LockedValue<UInt64?>(nil)
            TestThread {
                let buffer = UnsafeMutableRawPointer(bitPattern: bits)!
                read.withLock { $0 = buffer.load(as: UInt64.self) }
                rlk_frame_pool_give_back(buffer, UnsafeMutableRawPointer(bitPattern: poolBits))
            }.join()
            XCTAssertEqual(read.withLock { $0 }, UInt64(index), "the buffer was intact until given back")
            let last = index == bufferBits.count - 1
            XCTAssertEqual(rlk_frame_pool_live_pools(), poolsBefore + (last ? 0 : 1), "after \(index + 1) given back")
            XCTAssertEqual(rlk_frame_pool_live_slots(), slotsBefore + 2 - index)
        }
    }

    func testBuffersGivenBackByOtherThreadsWhileTheOwnerTakesAreNeitherLostNorShared() throws {
        let takes = runningUnderSanitizer ? 40_000 : 400_000
        let givers = (0..<4).map { _ in Giver() }
        let mismatches = LockedValue(0)
        let threads = givers.map { giver in TestThread { giver.run(mismatches: mismatches) } }
        defer { Giver.stop(givers, threads) }
        let pool = try XCTUnwrap(rlk_frame_pool_create())
        defer { rlk_frame_pool_retire(pool) }
        let sizes = [34, 100, 256, 1000, 4000, 16000, 60000]
        var fallbacks = 0
        for sequence in 0..<takes {
            let size = sizes[sequence % sizes.count]
            guard let buffer = rlk_frame_pool_take(pool, size) else {
                fallbacks += 1
                continue
            }
            let stamp = UInt64(sequence)
            buffer.storeBytes(of: stamp, as: UInt64.self)
            buffer.storeBytes(of: stamp, toByteOffset: size - 8, as: UInt64.self)
            givers[sequence % givers.count].put(.buffer(UInt(bitPattern: buffer), pool: UInt(bitPattern: pool),
                                                        stamp: stamp, size: size))
        }
        Giver.stop(givers, threads)

        XCTAssertEqual(mismatches.withLock { $0 }, 0, "a buffer was handed out again while still out")
        let allocated = allocated(pool)
        XCTAssertEqual(free(pool), allocated, "every buffer came back")
        for index in classes where allocated[Int(index)] > rlk_frame_pool_class_limit(index) {
            XCTFail("class \(index) allocated \(allocated[Int(index)]) slots, over its bound")
        }
        print("\(takes) takes, \(fallbacks) fallbacks, slots allocated per class: \(allocated)")
    }

    func testRetiringWhileOtherThreadsGiveBackFreesEveryBufferAndThePoolExactlyOnce() throws {
        let (poolsBefore, slotsBefore) = (rlk_frame_pool_live_pools(), rlk_frame_pool_live_slots())
        let givers = (0..<3).map { _ in Giver() }
        let mismatches = LockedValue(0)
        let threads = givers.map { giver in TestThread { giver.run(mismatches: mismatches) } }
        defer { Giver.stop(givers, threads) } // a failed round returns early
        let roundsDone = DispatchSemaphore(value: 0)
        let rounds = runningUnderSanitizer ? 300 : 2000
        for round in 0..<rounds {
            let pool = try XCTUnwrap(rlk_frame_pool_create())
            // Some buffers given back before the retirement, some during it, some after.
            for index in 0..<24 {
                let size = [40, 700, 3000, 20_000][index % 4]
                let buffer = try XCTUnwrap(rlk_frame_pool_take(pool, size))
                let stamp = UInt64(round * 100 + index)
                buffer.storeBytes(of: stamp, as: UInt64.self)
                buffer.storeBytes(of: stamp, toByteOffset: size - 8, as: UInt64.self)
                givers[index % givers.count].put(.buffer(UInt(bitPattern: buffer), pool: UInt(bitPattern: pool),
                                                         stamp: stamp, size: size))
            }
            rlk_frame_pool_retire(pool)
            for giver in givers { giver.put(.signal(roundsDone)) }
            for _ in givers { waitOrFail(roundsDone, "round \(round)'s give-backs") }
            guard rlk_frame_pool_live_pools() == poolsBefore, rlk_frame_pool_live_slots() == slotsBefore else {
                return XCTFail("round \(round): \(rlk_frame_pool_live_pools() - poolsBefore) pools and "
                               + "\(rlk_frame_pool_live_slots() - slotsBefore) slots not freed")
            }
        }
        Giver.stop(givers, threads)
        XCTAssertEqual(mismatches.withLock { $0 }, 0)
    }
}

/// A thread that gives back the buffers it is handed, as a receiver closing libzmq
/// messages does, after checking each still holds the stamp the owner wrote at both ends.
/// The hand-over goes through a lock, which also orders the owner's writes before the
/// giver's reads for ThreadSanitizer; giving back uses the pool's own atomics only.
private final class Giver: @unchecked Sendable {
    enum Item {
        case buffer(UInt, pool: UInt, stamp: UInt64, size: Int)
        case signal(DispatchSemaphore)
        case stop
    }

    private let queue = LockedValue<(items: [Item], head: Int)>(([], 0))
    private let available = DispatchSemaphore(value: 0)

    func put(_ item: Item) {
        queue.withLock { $0.items.append(item) }
        available.signal()
    }

    private func next() -> Item {
        available.wait()
        return queue.withLock { queue in
            let item = queue.items[queue.head]
            queue.head += 1
            if queue.head == queue.items.count { queue = ([], 0) }
            return item
        }
    }

    /// Stops the givers once they have given back what they were handed, and joins their
    /// threads. A second call does nothing.
    static func stop(_ givers: [Giver], _ threads: [TestThread]) {
        for giver in givers where !giver.stopped {
            giver.stopped = true
            giver.put(.stop)
        }
        for thread in threads { thread.join() }
    }

    /// Whether `stop` was sent; the owner's thread only.
    private var stopped = false

    func run(mismatches: LockedValue<Int>) {
        while true {
            switch next() {
            case .buffer(let bits, let pool, let stamp, let size):
                let buffer = UnsafeMutableRawPointer(bitPattern: bits)!
                if buffer.load(as: UInt64.self) != stamp || buffer.loadUnaligned(fromByteOffset: size - 8, as: UInt64.self) != stamp {
                    mismatches.withLock { $0 += 1 }
                }
                rlk_frame_pool_give_back(buffer, UnsafeMutableRawPointer(bitPattern: pool))
            case .signal(let semaphore):
                semaphore.signal()
            case .stop:
                return
            }
        }
    }
}
