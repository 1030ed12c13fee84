/// The bytes of `port-throughput-processes`: every sender writes every byte of each
/// message and every receiver reads every byte, so that the case measures moving data,
/// not avoiding it. A payload is 64-bit words, word `i` being `seed &+ i` (the seed is the
/// message's sequence number): the receiver sums the words and checks the sum against the
/// closed form, which the optimizer cannot know, so it can drop neither the writes nor the
/// reads, and a message that arrived torn or stale is caught.
enum Payload {
    /// Writes `byteCount` bytes (a multiple of 8) at `buffer`, seeded with `seed`.
    @inline(__always)
    static func fill(_ buffer: UnsafeMutableRawPointer, byteCount: Int, seed: UInt64) {
        let words = buffer.assumingMemoryBound(to: UInt64.self)
        for index in 0..<byteCount / 8 { words[index] = seed &+ UInt64(truncatingIfNeeded: index) }
    }

    /// Writes what `fill` writes, at a `buffer` with no particular alignment (a payload in
    /// a message frame, after its header).
    @inline(__always)
    static func fillUnaligned(_ buffer: UnsafeMutableRawPointer, byteCount: Int, seed: UInt64) {
        for index in 0..<byteCount / 8 {
            buffer.storeBytes(of: seed &+ UInt64(truncatingIfNeeded: index), toByteOffset: index * 8, as: UInt64.self)
        }
    }

    /// Reads every word of a payload written by `fill`; crashes if its sum is not what
    /// `fill` wrote (a benchmark whose data is wrong measures nothing).
    @inline(__always)
    static func check(_ bytes: UnsafeRawBufferPointer) {
        let count = bytes.count / 8
        guard count > 0, bytes.count % 8 == 0, let base = bytes.baseAddress else {
            fatalError("payload of \(bytes.count) bytes: not whole 64-bit words")
        }
        let words = base.assumingMemoryBound(to: UInt64.self)
        var sum: UInt64 = 0
        for index in 0..<count { sum &+= words[index] }
        let n = UInt64(count)
        let expected = n &* words[0] &+ n &* (n &- 1) / 2
        if sum != expected { fatalError("payload of \(bytes.count) bytes torn: sum \(sum), expected \(expected)") }
    }
}
