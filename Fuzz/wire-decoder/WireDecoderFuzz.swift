// A libFuzzer target for RunLoopKit's wire decoder: whatever bytes a foreign peer sends,
// decoding must never crash, and what it accepts must encode back to the same frames.
//
// Built for fuzzing (libFuzzer drives it):
//   swift build --product WireDecoderFuzz -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING \
//       -Xlinker --allow-multiple-definition --scratch-path .build-fuzz
// Built normally, it replays corpus files (`WireDecoderFuzz FILE…`) or writes the seed
// corpus (`WireDecoderFuzz --write-seeds DIR`).
import RunLoopWire

/// Splits a fuzz input into ZeroMQ frames: one byte of frame count, then each frame as a
/// 2-byte little-endian length and that many bytes (cut short at the end of the input).
enum FuzzFraming {
    static func frames(from input: [UInt8]) -> [[UInt8]] {
        guard let count = input.first else { return [] }
        var frames: [[UInt8]] = []
        var offset = 1
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
        var input: [UInt8] = [UInt8(frames.count)]
        for frame in frames {
            input += [UInt8(frame.count & 0xFF), UInt8(frame.count >> 8)]
            input += frame
        }
        return input
    }
}

/// The property under test.
func checkDecoder(_ input: [UInt8]) {
    let frames = FuzzFraming.frames(from: input)
    guard let message = try? WireCodec.decode(frames) else { return }
    precondition(WireCodec.encode(message) == frames, "an accepted message must re-encode to its frames")
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
            let bytes = FuzzFraming.input(from: WireCodec.encode(message))
            try Data(bytes).write(to: URL(fileURLWithPath: "\(directory)/\(name)"))
        }
    }
}
