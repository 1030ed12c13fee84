// An image handed to another process three ways, each timed, with the descriptors of both
// processes counted before and after. The program starts a child process of itself, which
// registers a named port and checks in; the parent then sends it, as requests it answers
// with a checksum of what it read:
//   1. the image (3840 × 2160 × 4 bytes: 33 MB) as a plain data component: from the
//      second round on (once the child's port welcomed the parent's thread) it travels in
//      the parent's shared ring and the child's handler copies it once out of it
//      (`docs/wire-format.md`, "Shared memory"); a larger one goes through libzmq's ipc
//      socket, and one component stops at 64 MiB (`PortError.messageTooLarge`);
//   2. the same image in a sealed memfd, passed as a descriptor
//      (`LoopMessage.Component.descriptor`): the child checks the seals, maps it read-only
//      and reads it where it lies; the parent's timing includes writing the memfd;
//   3. an open file (an unlinked temporary file holding the image), passed as a
//      descriptor: the child reads its contents through its own descriptor (`pread`).
// Each rate is the image's bytes over the time from the parent starting the send to the
// child's answer, the child having read every byte; the child's own read-and-checksum time
// is printed beside it. Path 2 is what path 1 does for the application, by hand. The program exits 0 when
// every checksum matched and neither process has more descriptors open after the rounds
// than before them (counted after untimed rounds of each path, which open the
// connections, the descriptor side channel and the shared ring that stay).
import ArgumentParser
import Foundation
import Glibc
import RunLoopKit

let checkinMessage: Int32 = 100
let imageAsData: Int32 = 1
let imageInMemoryFile: Int32 = 2
let imageInOpenFile: Int32 = 3
let descriptorCount: Int32 = 4
let exitMessage: Int32 = 5

/// The way a round hands the image over.
enum Path: CaseIterable, CustomStringConvertible {
    case data, memoryFile, openFile

    var description: String {
        switch self {
        case .data: "data component"
        case .memoryFile: "sealed memfd (fd)"
        case .openFile: "open file (fd)"
        }
    }
}

/// What the child answered for one round.
struct Answer {
    var checksum: UInt64
    var childMicroseconds: Int

    init(_ reply: LoopMessage) throws {
        let fields = (reply.text ?? "").split(separator: " ")
        guard fields.count == 2, let checksum = UInt64(fields[0]), let micros = Int(fields[1]) else {
            print("parent: the child answered '\(reply.text ?? "")'")
            throw ExitCode.failure
        }
        self.checksum = checksum
        self.childMicroseconds = micros
    }
}

struct ImageHandoff: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "image-handoff",
        abstract: "An image-sized buffer and an open file handed to another process: data, a sealed memfd, a file.")

    @Option(help: "The image's width in pixels (4 bytes each).")
    var width = 3840

    @Option(help: "The image's height in pixels.")
    var height = 2160

    @Option(help: "Timed rounds of each path.")
    var rounds = 5

    @Option(help: .hidden)
    var childOf: String?

    func validate() throws {
        guard width > 0, height > 0, rounds > 0 else { throw ValidationError("width, height and rounds must be positive") }
        guard width * height * 4 <= LocalPort.PeerLimits.wireFrameLimit else {
            throw ValidationError("a data component stops at 64 MiB (\(LocalPort.PeerLimits.wireFrameLimit) bytes): "
                + "\(width) × \(height) × 4 is \(width * height * 4)")
        }
    }

    func run() throws {
        if let parentName = childOf {
            try runChild(parentName: parentName)
        } else {
            try runParent()
        }
    }

    // MARK: - Child process

    private func runChild(parentName: String) throws {
        let loop = ThreadRunLoop.current
        let parentPort = try RemotePort(named: parentName)
        let myName = "\(parentName).child"
        var shouldExit = false
        let clock = ContinuousClock()

        /// The checksum of what `read` reads, and the microseconds it took, as the reply.
        func answer(_ id: Int32, _ read: () throws -> UInt64) throws -> LoopMessage {
            var sum: UInt64 = 0
            let elapsed = try clock.measure { sum = try read() }
            return LoopMessage(id: id, text: "\(sum) \(Int((elapsed / .microseconds(1)).rounded()))")
        }

        let port = try LocalPort(name: myName) { message in
            switch message.id {
            case imageAsData:
                return try answer(message.id) {
                    guard let bytes = message.firstData else { throw ExitCode.failure }
                    return bytes.withUnsafeBytes(checksum)
                }
            case imageInMemoryFile:
                // The message owns the descriptor: it closes after this handler returns.
                return try answer(message.id) {
                    guard let fd = message.descriptors.first?.descriptor else { throw ExitCode.failure }
                    // Sealed against writes, so no one can change the bytes while they are read here.
                    guard try Kernel.seals(of: fd).isSuperset(of: imageSeals) else {
                        throw ValidationError("the memfd is not sealed against writes")
                    }
                    let size = Int(try Kernel.status(fd).st_size)
                    return try Kernel.withMappingForReading(fd, count: size, checksum)
                }
            case imageInOpenFile:
                return try answer(message.id) {
                    guard let fd = message.descriptors.first?.descriptor else { throw ExitCode.failure }
                    let bytes = try readAll(fd, count: Int(try Kernel.status(fd).st_size))
                    return bytes.withUnsafeBytes(checksum)
                }
            case descriptorCount:
                return LoopMessage(id: descriptorCount, text: "\(try openDescriptorCount())")
            case exitMessage:
                shouldExit = true
            default:
                break
            }
            return nil
        }
        loop.add(port, to: .default)
        // The child learns at once that its parent is gone, should the parent die.
        let parentLoss = try PortLossSource(watching: parentPort) { _ in shouldExit = true }
        loop.add(parentLoss, to: .default)
        try parentPort.send(LoopMessage(id: checkinMessage, text: myName), timeout: .seconds(10))
        let deadline = Deadline.after(.seconds(300)) // a bound, should all else fail
        while !shouldExit && Deadline.now() < deadline {
            loop.run(mode: .default, before: deadline)
        }
        parentLoss.invalidate()
        port.invalidate()
    }

    // MARK: - Parent process

    private func runParent() throws {
        let loop = ThreadRunLoop.current
        let parentName = "runloopkit.image-handoff.\(getpid())"
        let atStart = try openDescriptorCount()
        var childName: String?
        var childEnd: ChildExit?

        let parentPort = try LocalPort(name: parentName) { message in
            if message.id == checkinMessage { childName = message.text }
            return nil
        }
        loop.add(parentPort, to: .default)
        let pid = try spawnSelf(["--child-of", parentName])
        let childSource = try ChildProcessSource(pid: pid) { exit in childEnd = exit }
        loop.add(childSource, to: .default)
        defer { if childEnd == nil { kill(pid, SIGKILL) } }

        let checkinDeadline = Deadline.after(.seconds(30))
        while childName == nil && childEnd == nil && Deadline.now() < checkinDeadline {
            loop.run(mode: .default, before: checkinDeadline)
        }
        guard let childName else {
            print("parent: the child (pid \(pid)) did not check in: \(childEnd.map { "\($0)" } ?? "timed out")")
            throw ExitCode.failure
        }
        let child = try RemotePort(named: childName)

        let size = width * height * 4
        let image = makeImage(count: size)
        let expected = image.withUnsafeBytes(checksum)
        let file = try temporaryFile(holding: image)
        defer { Kernel.close(file) }
        print("parent: pid \(getpid()), child pid \(pid) owns '\(childName)'; image \(width)×\(height)×4 = \(size) bytes, "
            + "checksum \(String(expected, radix: 16))")

        func request(_ message: LoopMessage) throws -> LoopMessage {
            try child.sendRequest(message, sendTimeout: .seconds(30), receiveTimeout: .seconds(60))
        }
        func childDescriptorCount() throws -> Int {
            guard let count = Int(try request(LoopMessage(id: descriptorCount)).text ?? "") else { throw ExitCode.failure }
            return count
        }
        /// One round of `path`: its time from the start of the send to the child's answer.
        func round(_ path: Path) throws -> (elapsed: Duration, answer: Answer) {
            let clock = ContinuousClock()
            var reply: LoopMessage?
            let elapsed = try clock.measure {
                switch path {
                case .data:
                    reply = try request(LoopMessage(id: imageAsData, components: [.data(image)]))
                case .memoryFile:
                    let memfd = MessageDescriptor(adopting: try sealedMemoryFile(named: "image", holding: image))
                    reply = try request(LoopMessage(id: imageInMemoryFile, components: [.descriptor(memfd)]))
                case .openFile:
                    let copy = try MessageDescriptor(duplicating: file)
                    reply = try request(LoopMessage(id: imageInOpenFile, components: [.descriptor(copy)]))
                }
            }
            return (elapsed, try Answer(reply!))
        }

        // Untimed rounds of each path: the connections and the side channel they open stay,
        // and so does the shared ring with its doorbell (one descriptor on each side), made
        // at the data path's second or third round, once the child's port welcomed this thread.
        var mismatches = 0
        for path in Path.allCases + [.data, .data] {
            guard try round(path).answer.checksum != expected else { continue }
            print("parent: warm-up \(path): checksum differs")
            mismatches += 1
        }
        let parentBefore = try openDescriptorCount()
        let childBefore = try childDescriptorCount()

        var measured: [Path: [(elapsed: Duration, childMicroseconds: Int)]] = [:]
        for _ in 0..<rounds {
            for path in Path.allCases {
                let (elapsed, answer) = try round(path)
                if answer.checksum != expected {
                    print("parent: \(path): checksum \(String(answer.checksum, radix: 16)) differs")
                    mismatches += 1
                }
                measured[path, default: []].append((elapsed, answer.childMicroseconds))
            }
        }
        let parentAfter = try openDescriptorCount()
        let childAfter = try childDescriptorCount()

        print("rates over \(rounds) rounds, median (min–max), from the send to the child's answer, every byte read:")
        for path in Path.allCases {
            let sorted = measured[path, default: []].sorted { $0.elapsed < $1.elapsed }
            let rates = sorted.map { Double(size) / seconds($0.elapsed) / 1e6 }
            let median = sorted[sorted.count / 2]
            print("  \("\(path)".padding(toLength: 18, withPad: " ", startingAt: 0))\(format(rates[sorted.count / 2])) MB/s (\(format(rates.last!))–\(format(rates.first!))): "
                + "\(format(seconds(median.elapsed) * 1e3)) ms, of which the child's read and checksum "
                + "\(format(Double(median.childMicroseconds) / 1e3)) ms")
        }
        print("descriptors open (/proc/self/fd): parent \(atStart) at start, \(parentBefore) before, \(parentAfter) after; "
            + "child \(childBefore) before, \(childAfter) after")

        try child.send(LoopMessage(id: exitMessage), timeout: .seconds(5))
        let exitDeadline = Deadline.after(.seconds(10))
        while childEnd == nil && Deadline.now() < exitDeadline { loop.run(mode: .default, before: exitDeadline) }
        childSource.invalidate()
        parentPort.invalidate()
        print("child \(childEnd.map { "\($0)" } ?? "did not exit"); \(mismatches) checksums differ")
        guard mismatches == 0, parentAfter <= parentBefore, childAfter <= childBefore, childEnd == .exited(0) else {
            throw ExitCode.failure
        }
    }

    private func seconds(_ duration: Duration) -> Double {
        let (whole, attoseconds) = duration.components
        return Double(whole) + Double(attoseconds) / 1e18
    }

    private func format(_ rate: Double) -> String { String(format: "%.0f", rate) }

    /// Spawns this program with `arguments` with `posix_spawn` (not Foundation's `Process`,
    /// which would reap the child before its child source could) and returns its pid.
    private func spawnSelf(_ arguments: [String]) throws -> pid_t {
        let path = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, nil, nil, argv, environ)
        guard rc == 0 else {
            print("cannot spawn \(arguments): \(String(cString: strerror(rc)))")
            throw ExitCode.failure
        }
        return pid
    }
}

ImageHandoff.main()
