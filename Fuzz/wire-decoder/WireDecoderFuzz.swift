// A libFuzzer target for RunLoopKit's wire decoder, as a port receives through it: whatever
// frames a foreign peer sends, a port's receive path (routing id, REQ delimiter, envelope,
// reply-address cache: `PortDecoderProbe`) never crashes, agrees with the codec's model
// (`WireCodec.decode`) on every message, and what it accepts encodes back to the same frames.
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
        precondition(WireCodec.encode(delivered) == body, "an accepted message must re-encode to its frames")
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
    /// A seed per shape of message, so the fuzzer starts from valid ones.
    static func writeSeeds(to directory: String) throws {
        let seeds: [String: WireMessage] = [
            "checkin": WireMessage(kind: .message, messageID: 100, correlationID: 0, replyAddress: nil,
                                   components: [.port(address: "inproc://runloopkit.1.1")]),
            "request": WireMessage(kind: .request, messageID: 7, correlationID: 0x1234,
                                   replyAddress: "ipc:///tmp/runloopkit-0/reply.sock", components: [.data(Array("ping".utf8))]),
            "reply": WireMessage(kind: .reply, messageID: 7, correlationID: 0x1234, replyAddress: nil,
                                 components: [.data(Array("pong".utf8)), .data([])]),
            "empty": WireMessage(kind: .message, messageID: 0, correlationID: 0, replyAddress: nil, components: []),
            "tcp-port": WireMessage(kind: .message, messageID: -1, correlationID: 0, replyAddress: "tcp://127.0.0.1:5555",
                                    components: [.port(address: "tcp://10.0.0.1:1"), .data([0, 255])]),
        ]
        for (name, message) in seeds {
            let routingID: [UInt8] = [0, 0x80, 0, 0, 0x29] // libzmq's are 5 bytes
            let delimiter: [[UInt8]] = name == "request" ? [[]] : [] // a REQ requester's
            let bytes = FuzzFraming.input(from: [routingID] + delimiter + WireCodec.encode(message))
            try Data(bytes).write(to: URL(fileURLWithPath: "\(directory)/\(name)"))
        }
    }
}
