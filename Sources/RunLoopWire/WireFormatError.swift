/// Why a received multipart message is not a valid RunLoopKit wire message.
///
/// Frame indices count from 0 (the header); component indices count from 0 (frame 2).
package enum WireFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The message has no frames at all.
    case noFrames
    /// The header (frame 0) has this many bytes, fewer than its fixed 20 bytes (or fewer
    /// than the 4 needed to read the magic and the version).
    case headerTooShort(Int)
    /// The header does not start with "RLK".
    case badMagic
    /// The header's version is not one this receiver knows (only 2).
    case unsupportedVersion(UInt8)
    /// The header's kind byte is not 0, 1 or 2.
    case unknownKind(UInt8)
    /// The header's flags byte is not 0, as version 2 requires.
    case reservedFlags(UInt8)
    /// The header's length is not 20 plus its component count.
    case headerLengthMismatch(expected: Int, actual: Int)
    /// The message has `actual` frames where its header announces `expected` (2 + components).
    case frameCountMismatch(expected: Int, actual: Int)
    /// The component at `index` has a kind byte that is neither 0 (data) nor 1 (port).
    case unknownComponentKind(index: Int, kind: UInt8)
    /// The header announces more components than `WireLimits.maxComponents`.
    case tooManyComponents(Int)
    /// The frame at `index` has `size` bytes, more than `WireLimits.maxFrameBytes`.
    case frameTooLarge(index: Int, size: Int)
    /// The frame at `index` (1: the reply address; 2 and up: a port component) is not a
    /// valid address: not UTF-8, empty, longer than `WireLimits.maxAddressBytes`, holding
    /// a control character, or not starting with `inproc://`, `ipc://` or `tcp://`.
    case addressInvalid(index: Int)

    package var description: String {
        switch self {
        case .noFrames:
            "message has no frames"
        case .headerTooShort(let size):
            "header is \(size) bytes, too short"
        case .badMagic:
            "header does not start with \"RLK\""
        case .unsupportedVersion(let version):
            "unsupported wire format version \(version)"
        case .unknownKind(let kind):
            "unknown message kind \(kind)"
        case .reservedFlags(let flags):
            "reserved header flags set: 0x\(String(flags, radix: 16))"
        case .headerLengthMismatch(let expected, let actual):
            "header is \(actual) bytes where its component count needs \(expected)"
        case .frameCountMismatch(let expected, let actual):
            "message has \(actual) frames where its header announces \(expected)"
        case .unknownComponentKind(let index, let kind):
            "component \(index) has unknown kind \(kind)"
        case .tooManyComponents(let count):
            "message announces \(count) components, more than allowed"
        case .frameTooLarge(let index, let size):
            "frame \(index) is \(size) bytes, more than allowed"
        case .addressInvalid(let index):
            "frame \(index) is not a valid port address"
        }
    }
}
