/// Why a received multipart message is not a valid RunLoopKit wire message.
///
/// Frame indices count from 0 (the message frame); component indices count from 0, in the
/// order of the component table.
@usableFromInline package enum WireFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The message has no frames at all.
    case noFrames
    /// The message frame (frame 0) has this many bytes, fewer than its fixed 22-byte header
    /// and its component table (or fewer than the 4 needed to read the magic and the version).
    case headerTooShort(Int)
    /// The header does not start with "RLK".
    case badMagic
    /// The header's version is not one this receiver knows (only 3).
    case unsupportedVersion(UInt8)
    /// The header's kind byte is not 0, 1, 2 or 3.
    case unknownKind(UInt8)
    /// The header's flags byte is not 0, as version 3 requires.
    case reservedFlags(UInt8)
    /// The message frame's length is not what its header and component table add up to.
    case headerLengthMismatch(expected: Int, actual: Int)
    /// The message has `actual` frames where its component table announces `expected` (1 +
    /// the components that travel alone).
    case frameCountMismatch(expected: Int, actual: Int)
    /// The component at `index` has a kind byte that is not 0 (data), 1 (port), 2 (data
    /// in a frame of its own) or 3 (descriptor).
    case unknownComponentKind(index: Int, kind: UInt8)
    /// The header announces more components than `WireLimits.maxComponents`.
    case tooManyComponents(Int)
    /// The frame at `index` has `size` bytes, more than `WireLimits.maxFrameBytes`.
    case frameTooLarge(index: Int, size: Int)
    /// The component at `index`, which travels in a frame of its own, has `actual` bytes
    /// where the component table says `expected`.
    case componentLengthMismatch(index: Int, expected: Int, actual: Int)
    /// The reply port is not a valid address: not UTF-8, longer than
    /// `WireLimits.maxAddressBytes`, holding a control character, or not starting with
    /// `inproc://`, `ipc://` or `tcp://`.
    case replyAddressInvalid
    /// The port component at `component` is not a valid address (as for the reply port,
    /// and not empty).
    case addressInvalid(component: Int)
    /// The descriptor component at `index` is `length` bytes, not 20 (a token and an index).
    case descriptorLengthInvalid(index: Int, length: Int)
    /// The shared data component at `index` is `length` bytes, not 32 (a token, a start
    /// and a length).
    case sharedLengthInvalid(index: Int, length: Int)
    /// A descriptor component names descriptors its sender did not send to this port: an
    /// unknown or forged token, another process's, or an index past what the token holds;
    /// or a shared data component names no ring its sender shared with this port, or bytes
    /// outside it (found when the receiver claims them, after every check above).
    case descriptorsNotFound(component: Int)

    @usableFromInline package var description: String {
        switch self {
        case .noFrames:
            "message has no frames"
        case .headerTooShort(let size):
            "message frame is \(size) bytes, too short for its header"
        case .badMagic:
            "header does not start with \"RLK\""
        case .unsupportedVersion(let version):
            "unsupported wire format version \(version)"
        case .unknownKind(let kind):
            "unknown message kind \(kind)"
        case .reservedFlags(let flags):
            "reserved header flags set: 0x\(String(flags, radix: 16))"
        case .headerLengthMismatch(let expected, let actual):
            "message frame is \(actual) bytes where its header announces \(expected)"
        case .frameCountMismatch(let expected, let actual):
            "message has \(actual) frames where its header announces \(expected)"
        case .unknownComponentKind(let index, let kind):
            "component \(index) has unknown kind \(kind)"
        case .tooManyComponents(let count):
            "message announces \(count) components, more than allowed"
        case .frameTooLarge(let index, let size):
            "frame \(index) is \(size) bytes, more than allowed"
        case .componentLengthMismatch(let index, let expected, let actual):
            "component \(index) is \(actual) bytes where its header announces \(expected)"
        case .replyAddressInvalid:
            "the reply port is not a valid port address"
        case .addressInvalid(let component):
            "component \(component) is not a valid port address"
        case .descriptorLengthInvalid(let index, let length):
            "descriptor component \(index) is \(length) bytes, not 20"
        case .sharedLengthInvalid(let index, let length):
            "shared data component \(index) is \(length) bytes, not 32"
        case .descriptorsNotFound(let component):
            "component \(component) names descriptors its sender did not send here"
        }
    }
}
