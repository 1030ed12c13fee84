// A libFuzzer target for RunLoopKit's wire decoder, as a port receives through it: whatever
// frames a foreign peer sends, a port's receive path (routing id, REQ delimiter, envelope,
// reply-address cache: `PortDecoderProbe`) never crashes, agrees with the codec's model
// (`WireCodec.decode`) on every message, and what it accepts encodes back to the same frames
// (built by hand with each data component where it was: receivers accept any mix of inline
// and lone components, where the encoder puts only those of 64 KiB or more alone).
// Small limits (16 components, 256-byte frames, 64-byte addresses) put every limit within
// the fuzzer's reach.
//
// Built for fuzzing (libFuzzer drives it):
//   swift build --product WireDecoderFuzz -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING \
//       -Xlinker --allow-multiple-definition --scratch-path .build-fuzz
// Built normally, it replays corpus files (`WireDecoderFuzz FILE…`) or writes the seed
// corpus (`WireDecoderFuzz --write-seeds DIR`).
import RunLoopKit
import RunLoopWire

/// Splits a fuzz input into ZeroMQ frames: two bytes of frame count (little-endian), then
/// each frame as a 2-byte little-endian length and that many bytes (cut short at the end of
/// the input). The first frame is the sender's routing id, as a port's ROUTER socket gets it.
enum FuzzFraming {
    static func frames(from input: [UInt8]) -> [[UInt8]] {
        guard input.count >= 2 else { return [] }
        let count = Int(input[0]) | Int(input[1]) << 8
        var frames: [[UInt8]] = []
        var offset = 2
        for _ in 0..<count {
            guard offset + 2 <= input.count else { break }
            let length = Int(input[offset]) | Int(input[offset + 1]) << 8
            offset += 2
            let end = min(offset + length, input.count)
            frames.append(Array(input[offset..<end]))
            offset = end
        }
        return frames
    }

    static func input(from frames: [[UInt8]]) -> [UInt8] {
        var input: [UInt8] = [UInt8(frames.count & 0xFF), UInt8(frames.count >> 8)]
        for frame in frames {
            input += [UInt8(frame.count & 0xFF), UInt8(frame.count >> 8)]
            input += frame
        }
        return input
    }
}

/// Wire messages built by hand from the format (`docs/wire-format.md`), each data
/// component inline or alone as the caller says: the encoder puts only components of 64 KiB
/// or more alone, which no fuzz input holds, where receivers accept any mix.
enum FuzzFrames {
    /// A component: its table kind (0 data inline, 1 port, 2 data alone, 3 descriptor, 4
    /// shared data's note) and its bytes.
    struct Part {
        let kind: UInt8
        let bytes: [UInt8]
        static func data(_ bytes: [UInt8]) -> Part { Part(kind: 0, bytes: bytes) }
        static func port(_ address: String) -> Part { Part(kind: 1, bytes: Array(address.utf8)) }
        static func alone(_ bytes: [UInt8]) -> Part { Part(kind: 2, bytes: bytes) }
        static func descriptor(token: [UInt8], index: UInt32) -> Part {
            Part(kind: 3, bytes: token + (0..<4).map { UInt8(truncatingIfNeeded: index >> (8 * UInt32($0))) })
        }
        static func sharedData(token: [UInt8], start: UInt64, length: UInt64) -> Part {
            Part(kind: 4, bytes: token + (0..<8).map { UInt8(truncatingIfNeeded: start >> (8 * UInt64($0))) }
                 + (0..<8).map { UInt8(truncatingIfNeeded: length >> (8 * UInt64($0))) })
        }
    }

    /// The message frame (header, component table, reply port, inline components), then
    /// each kind-2 component's frame.
    static func build(kind: WireKind, messageID: Int32, correlationID: UInt64 = 0, replyAddress: String? = nil,
                      parts: [Part]) -> [[UInt8]] {
        func littleEndian(_ value: UInt64, _ count: Int) -> [UInt8] {
            (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
        }
        let reply = Array((replyAddress ?? "").utf8)
        var frame: [UInt8] = [0x52, 0x4C, 0x4B, 3, kind.rawValue, 0] + littleEndian(UInt64(parts.count), 2)
            + littleEndian(UInt64(UInt32(bitPattern: messageID)), 4) + littleEndian(correlationID, 8)
            + littleEndian(UInt64(reply.count), 2)
        for part in parts { frame += [part.kind] + littleEndian(UInt64(part.bytes.count), 4) }
        frame += reply
        for part in parts where part.kind != 2 { frame += part.bytes }
        return [frame] + parts.filter { $0.kind == 2 }.map(\.bytes)
    }

    /// `message` built again with each data component where `frames` (which it was decoded
    /// from) had it.
    static func rebuild(_ message: WireMessage, placedAs frames: [[UInt8]]) -> [[UInt8]] {
        let parts = message.components.enumerated().map { index, component -> Part in
            switch component {
            case .port(let address): .port(address)
            case .data(let bytes): frames[0][22 + 5 * index] == 2 ? .alone(bytes) : .data(bytes)
            case .descriptor(let token, let index): .descriptor(token: token, index: index)
            case .sharedData(let token, let start, let length): .sharedData(token: token, start: start, length: length)
            }
        }
        return build(kind: message.kind, messageID: message.messageID, correlationID: message.correlationID,
                     replyAddress: message.replyAddress, parts: parts)
    }
}

/// The limits the fuzzer decodes with: small, so that each is reachable.
let fuzzLimits = WireLimits(maxComponents: 16, maxFrameBytes: 256, maxAddressBytes: 64)

/// The port's decoder, kept from one input to the next as a port keeps its reply-address
/// cache. libFuzzer calls the target on one thread.
nonisolated(unsafe) var portDecoder = PortDecoderProbe()

/// The property under test.
func checkDecoder(_ input: [UInt8]) {
    let frames = FuzzFraming.frames(from: input)
    let port = Result { () throws(WireFormatError) in try portDecoder.decode(frames, limits: fuzzLimits) }
    // The wire message's own frames, as the port split them off the routing id and a delimiter.
    let hasDelimiter = frames.count > 1 && frames[1].isEmpty
    let body = Array(frames.dropFirst(hasDelimiter ? 2 : 1))
    let model = Result { () throws(WireFormatError) in try WireCodec.decode(body, limits: fuzzLimits) }
    switch (port, model) {
    case (.success(let delivered), .success(let modelled)):
        precondition(delivered == modelled, "the port and the model decode a message alike")
        precondition(FuzzFrames.rebuild(delivered, placedAs: body) == body,
                     "an accepted message must re-encode to its frames, each data component where it was")
        // No fuzz input holds a component of 64 KiB: the encoder puts every one inline.
        precondition(body.count > 1 || WireCodec.encode(delivered) == body, "the encoder must write what it accepted")
    case (.failure(.descriptorsNotFound), .success(let modelled)):
        // The port claims descriptors from its side channel, which the probe has none of:
        // a valid message with descriptor components is dropped, never delivered in part.
        precondition(modelled.components.contains {
            switch $0 {
            case .descriptor, .sharedData: true
            case .data, .port: false
            }
        }, "only a message with descriptor or shared data components is dropped for them")
    case (.failure(let dropped), .failure(let rejected)):
        precondition(frames.isEmpty || dropped == rejected, "the port and the model reject a message alike")
    default:
        preconditionFailure("the port and the model disagree: \(port) against \(model)")
    }
}

import Foundation

#if FUZZING
/// libFuzzer's per-input entry point.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWireDecoder(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    checkDecoder(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

/// libFuzzer's entry for programs that keep their own `main`. SwiftPM defines `main` for
/// the target too, so the fuzz build links with `--allow-multiple-definition`; whichever
/// `main` wins, libFuzzer runs `fuzzWireDecoder` on every input.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32
#endif

@main
enum WireDecoderFuzz {
    static func main() throws {
        #if FUZZING
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzWireDecoder(data, size) })
        #else
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == "--write-seeds", arguments.count == 2 {
            try writeSeeds(to: arguments[1])
            return
        }
        for path in arguments {
            checkDecoder(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        }
        print("replayed \(arguments.count) inputs")
        #endif
    }
    /// A seed per shape of message, so the fuzzer starts from valid ones: every kind, reply
    /// ports, port components, descriptor components, data components inline and alone, a REQ requester's
    /// delimiter, and messages at the fuzzer's limits (16 components, 256-byte frames,
    /// 64-byte addresses).
    static func writeSeeds(to directory: String) throws {
        let port64 = "inproc://" + String(repeating: "p", count: 55) // 64 bytes: the longest address
        // 16 components, the last one filling the message frame to 256 bytes.
        func atTheLimits(fill: Int) -> [[UInt8]] {
            FuzzFrames.build(kind: .request, messageID: .max, correlationID: .max, replyAddress: port64, parts: [
                .port(port64), .data([1]), .alone(Array(repeating: 2, count: 256)), .port("tcp://h:1"), .data([]),
                .data([3]), .alone([4]), .port("ipc://x"), .data([]), .data([6]), .data([7]), .data([8]), .data([9]),
                .data([10]), .alone([]), .data(Array(repeating: 11, count: fill)),
            ])
        }
        let seeds: [String: (frames: [[UInt8]], fromREQ: Bool)] = [
            "checkin": (WireCodec.encode(WireMessage(kind: .message, messageID: 100, replyAddress: "inproc://runloopkit.1.1",
                                                     components: [.port(address: "inproc://runloopkit.1.1")])), false),
            "request": (WireCodec.encode(WireMessage(kind: .request, messageID: 7, correlationID: 0x1234,
                                                     components: [.data(Array("ping".utf8))])), false),
            "request-from-req": (WireCodec.encode(WireMessage(
                kind: .request, messageID: 7, correlationID: 0x1234, replyAddress: "ipc:///tmp/runloopkit-0/reply.sock",
                components: [.data(Array("ping".utf8))])), true),
            "reply": (WireCodec.encode(WireMessage(kind: .reply, messageID: 7, correlationID: 0x1234,
                                                   components: [.data(Array("pong".utf8)), .data([])])), false),
            "failure": (WireCodec.encode(WireMessage(kind: .failure, messageID: 9, correlationID: 0x1235,
                                                     components: [.data(Array("job refused: fail".utf8))])), false),
            "empty": (WireCodec.encode(WireMessage(kind: .message, messageID: 0)), false),
            "tcp-port": (WireCodec.encode(WireMessage(kind: .message, messageID: -1, replyAddress: "tcp://127.0.0.1:5555",
                                                      components: [.port(address: "tcp://10.0.0.1:1"), .data([0, 255])])), false),
            // Data components in frames of their own (kind 2), between inline ones.
            "alone": (FuzzFrames.build(kind: .message, messageID: 3, parts: [
                .alone(Array("abc".utf8)), .data([1]), .port("inproc://p"), .alone([]), .data([]),
            ]), false),
            "alone-reply": (FuzzFrames.build(kind: .reply, messageID: 7, correlationID: 0x1234,
                                             parts: [.alone(Array(repeating: 0x42, count: 200))]), true),
            // Descriptor components (kind 3: a token and an index, 20 bytes), which a port
            // claims from its side channel: the probe has none, so it drops the message.
            "descriptors": (FuzzFrames.build(kind: .message, messageID: 4, parts: [
                .descriptor(token: Array(0..<16), index: 0), .data([1]), .descriptor(token: Array(0..<16), index: 1),
            ]), false),
            // At the limits: 16 components, a message frame and a lone frame of 256 bytes,
            // addresses of 64 bytes.
            "at-the-limits": (atTheLimits(fill: fuzzLimits.maxFrameBytes - atTheLimits(fill: 0)[0].count), false),
        ]
        for (name, seed) in seeds {
            let routingID: [UInt8] = [0, 0x80, 0, 0, 0x29] // libzmq's are 5 bytes
            let delimiter: [[UInt8]] = seed.fromREQ ? [[]] : [] // a REQ requester's
            let bytes = FuzzFraming.input(from: [routingID] + delimiter + seed.frames)
            precondition((try? WireCodec.decode(seed.frames, limits: fuzzLimits)) != nil, "seed \(name) is a valid message")
            precondition(seed.frames.allSatisfy { $0.count <= fuzzLimits.maxFrameBytes })
            try Data(bytes).write(to: URL(fileURLWithPath: "\(directory)/\(name)"))
        }
    }
}
