import Dispatch
import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopWire
import XCTest

/// The wire format from another language: `Tests/peers/pyzmq_peer.py`, written from
/// `docs/wire-format.md` with pyzmq alone, checks in with a named port (the guide's
/// Listings 3-16 to 3-19) and makes a request of it.
final class PyZMQPeerTests: XCTestCase {
    private var loop: ThreadRunLoop { ThreadRunLoop.current }

    private static let peerScript = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent() // RunLoopKitTests
        .deletingLastPathComponent() // Tests
        .appendingPathComponent("peers/pyzmq_peer.py")

    func testAPythonPyZMQPeerChecksInAndCompletesARequestReplyWithANamedPort() throws {
        guard pythonCanImportZMQ() else {
            return XCTFail("\(Self.python) cannot import zmq: run `sh scripts/install-dependencies.sh` (Debian's python3-zmq)")
        }
        let suffix = "\(getpid())-\(UInt32.random(in: .min ... .max))"
        let mainName = "pytest-main-\(suffix)"
        let workerName = "pytest-worker-\(suffix)"
        let directory = try RuntimeDirectory.path() // the peer must use the same directory
        let workerAddress = "ipc://\(directory)/\(workerName).sock"

        var checkIn: LoopMessage?
        var answers: [String] = []
        var requests: [LoopMessage] = []
        var done = false
        struct JobRefused: Error, CustomStringConvertible {
            let job: String
            var description: String { "job refused: \(job)" }
        }
        let port = try LocalPort(name: mainName) { message in
            switch message.id {
            case 100: checkIn = message
            case 2: answers.append(message.text ?? "?")
            case 3: done = true
            case 7:
                requests.append(message)
                // On the wire the reply carries the request's id (7) whatever id this
                // returns (docs/wire-format.md, "Requests and replies"); the peer checks it.
                return LoopMessage(id: 8, components: [.data(Array("pong:".utf8) + (message.data.first ?? []))])
            case 9: throw JobRefused(job: message.text ?? "?") // the peer checks the failure it gets
            default: XCTFail("unexpected message \(message.id) from the peer")
            }
            return nil
        }
        loop.add(port, to: .default)
        defer {
            port.invalidate()
            unlink("\(directory)/\(workerName).sock") // if the peer could not remove it
        }

        // The peer's end wakes this loop (its source reaps it), so that a failing peer fails
        // the test at once.
        let peer = try SpawnedProcess([Self.python, Self.peerScript.path, "--runtime-dir", directory,
                                       "--main-name", mainName, "--worker-name", workerName], reapedByCaller: true)
        var peerEnd: ChildExit?
        loop.add(try ChildProcessSource(pid: peer.pid) { peerEnd = $0 }, to: .default)
        defer { Self.end(peer, ended: { peerEnd != nil }) }
        /// How the peer ended and what it said; ends it first if it is still running.
        func peerReport() -> String {
            Self.end(peer, ended: { peerEnd != nil })
            return "peer \(peerEnd.map { "\($0)" } ?? "not reaped"); stdout: \(peer.stdout); stderr: \(peer.stderr)"
        }

        // (a) The check-in: the peer's port arrives as a port component.
        guard runCurrentLoop(safetyNet: .seconds(30), until: { checkIn != nil || peerEnd != nil }), let worker = checkIn?.ports.first else {
            return XCTFail("no check-in with a port from the peer; \(peerReport())")
        }
        try worker.send(LoopMessage(id: 1, text: "job-42"))

        // The answer (2), the peer's requests (7, answered by the handler; 9, whose handler
        // throws), then "done" (3).
        guard runCurrentLoop(safetyNet: .seconds(30), until: { done || (peerEnd != nil && peerEnd != .exited(0)) }), done else {
            return XCTFail("the peer did not finish; \(peerReport())")
        }
        XCTAssertTrue(runCurrentLoop(safetyNet: .seconds(30)) { peerEnd != nil }, "the peer exits")
        let report = peerReport()
        XCTAssertEqual(peerEnd, .exited(0), report)
        XCTAssertTrue(report.contains("pyzmq peer ok"), report)

        XCTAssertEqual(worker.address.rawValue, workerAddress)
        XCTAssertEqual(checkIn?.replyPort?.address.rawValue, workerAddress)
        XCTAssertEqual(answers, ["JOB-42"])
        // (b) The request/replies, from a DEALER and from a REQ socket: the peer checked
        // each reply (kind, correlation id, data), read from the socket the request left by.
        XCTAssertEqual(requests.map(\.text), ["ping", "ping"])
        XCTAssertEqual(requests.map(\.replyPort), [nil, nil], "a requester needs no port of its own")
        XCTAssertEqual(port.statistics.messagesReceived, 6)
        XCTAssertEqual(port.statistics.handlerErrors, 1)
        XCTAssertEqual(port.statistics.messagesDropped, 0)
        XCTAssertEqual(port.statistics.repliesFailed, 0)
    }

    /// The Python listings of `docs/wire-format.md`'s worked example, run as one script
    /// against a port bound on tcp loopback, with the document's addresses replaced: the
    /// server's by the port's, the worker's by a port the system picks (the listing reads
    /// the address it bound). The listing checks in, parses a job whose second component
    /// travels alone (walking the table), answers with a component that travels alone, and
    /// checks a reply and a failure; it asserts what it reads, so its exit status says.
    func testTheWireFormatDocumentsPythonListingRunsAgainstAPort() throws {
        guard pythonCanImportZMQ() else {
            return XCTFail("\(Self.python) cannot import zmq: run `sh scripts/install-dependencies.sh` (Debian's python3-zmq)")
        }
        let document = try WireDocument.text()
        let example = try XCTUnwrap(document.range(of: "## Worked example")?.upperBound, "the document has a worked example")
        let blocks = document[example...].components(separatedBy: "```python\n").dropFirst()
            .map { $0.components(separatedBy: "```").first ?? "" }
        XCTAssertEqual(blocks.count, 2, "the check-in, request and reply listing, and the failure's")

        struct JobRefused: Error, CustomStringConvertible {
            let job: String
            var description: String { "job refused: \(job)" }
        }
        var checkIn: LoopMessage?
        var answer: LoopMessage?
        var requests: [LoopMessage] = []
        let port = try LocalPort { message in
            switch message.id {
            case 100: checkIn = message
            case 2: answer = message
            case 7:
                requests.append(message)
                return LoopMessage(id: 7, components: [.data(Array("pong:".utf8) + (message.data.first ?? []))])
            case 9: throw JobRefused(job: message.text ?? "?")
            default: XCTFail("unexpected message \(message.id) from the listing")
            }
            return nil
        }
        loop.add(port, to: .default)
        defer { port.invalidate() }
        let server = try port.bind(tcp: "tcp://127.0.0.1:*")

        var script = blocks.joined(separator: "\n")
        for (documented, actual) in [("tcp://127.0.0.1:5555", server.rawValue), ("tcp://127.0.0.1:5556", "tcp://127.0.0.1:*")] {
            XCTAssertTrue(script.contains(documented), "the listing uses \(documented)")
            script = script.replacingOccurrences(of: documented, with: actual)
        }
        let scriptFile = FileManager.default.temporaryDirectory
            .appendingPathComponent("wire-format-listing-\(getpid())-\(UInt32.random(in: .min ... .max)).py")
        try script.write(to: scriptFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: scriptFile) }

        let listing = try SpawnedProcess([Self.python, scriptFile.path], reapedByCaller: true)
        var listingEnd: ChildExit?
        loop.add(try ChildProcessSource(pid: listing.pid) { listingEnd = $0 }, to: .default)
        defer { Self.end(listing, ended: { listingEnd != nil }) }
        func report() -> String {
            Self.end(listing, ended: { listingEnd != nil })
            return "listing \(listingEnd.map { "\($0)" } ?? "not reaped"); stdout: \(listing.stdout); stderr: \(listing.stderr)"
        }

        guard runCurrentLoop(safetyNet: .seconds(30), until: { checkIn != nil || listingEnd != nil }),
              let worker = checkIn?.ports.first else {
            return XCTFail("no check-in with a port from the listing; \(report())")
        }
        let results = (0..<70_000).map { UInt8(truncatingIfNeeded: $0) } // travels alone
        try worker.send(LoopMessage(id: 1, components: [.data(Array("job-42".utf8)), .data(results)]))
        guard runCurrentLoop(safetyNet: .seconds(30), until: { listingEnd != nil }) else {
            return XCTFail("the listing did not finish; \(report())")
        }
        let said = report()
        XCTAssertEqual(listingEnd, .exited(0), said)

        XCTAssertEqual(checkIn?.components.count, 1)
        XCTAssertTrue(worker.address.rawValue.hasPrefix("tcp://127.0.0.1:"), worker.address.rawValue)
        XCTAssertNil(checkIn?.replyPort)
        XCTAssertEqual(answer?.data.map(\.count), [6, 100_000])
        XCTAssertEqual(answer?.data.first, Array("JOB-42".utf8))
        XCTAssertTrue(answer?.data.last?.allSatisfy { $0 == 0 } ?? false, "the results the listing sent are zeros")
        XCTAssertEqual(requests.map(\.text), ["ping"])
        XCTAssertEqual(port.statistics.handlerErrors, 1)
        XCTAssertEqual(port.statistics.messagesDropped, 0)
        XCTAssertEqual(port.statistics.repliesFailed, 0)
    }

    /// The Python listing of `docs/wire-format.md`'s "Descriptors", run against a named
    /// port with the document's socket path replaced by the port's: the handler reads the
    /// pipe through its own descriptor, which the message closes after it. The hex the
    /// section shows is what RunLoopKit writes for the same message and attach packet.
    func testTheWireFormatDocumentsDescriptorListingHandsANamedPortAPipe() throws {
        guard pythonCanImportZMQ() else {
            return XCTFail("\(Self.python) cannot import zmq: run `sh scripts/install-dependencies.sh` (Debian's python3-zmq)")
        }
        let section = try WireFormatSection("Descriptors")
        let blocks = section.listings
        XCTAssertEqual(blocks.count, 1)
        // The hex shown: the message with the token 00 01 … 0f, and its attach packet.
        let token = Array(UInt8(0)..<16)
        let frame = WireCodec.encode(WireMessage(messageID: 42, components: [.descriptor(token: token, index: 0)]))
        XCTAssertEqual(try section.hex(after: "with the token `00 01 … 0f`:"), frame[0])
        XCTAssertEqual(try section.hex(after: "the attach packet:"),
                       DescriptorPacket.encode(.attach, try XCTUnwrap(DescriptorToken(token))))

        let (port, reader) = try descriptorReadingPort(named: "descriptor-listing")
        defer { port.invalidate() }
        loop.add(port, to: .default)
        let (listing, ending) = try runListing(blocks[0], against: port)
        defer { ending.finish(listing) }
        XCTAssertTrue(runCurrentLoop(safetyNet: .seconds(30), until: { !reader.read.isEmpty }),
                      "listing \(ending.exit.map { "\($0)" } ?? "running"); \(listing.stdout) \(listing.stderr)")
        XCTAssertEqual(reader.read, ["through a pipe"])
        XCTAssertEqual(port.statistics.messagesDropped, 0)
        XCTAssertEqual(fcntl(try XCTUnwrap(reader.descriptors.first), F_GETFD), -1, "the message closed its descriptor after the handler")
    }

    /// The same listing, its process made to reach its end before its message can leave:
    /// the port's socket is renamed away before the listing starts (its ZeroMQ connection
    /// fails and is retried), and put back only when the listing's own code closes its
    /// socket or terminates its context, or, if it never does, once the listing ended. A
    /// send only queues the message in libzmq, whose I/O thread ends with the process: the
    /// listing must wait for it to be written out before it ends, or the message is lost.
    func testTheDescriptorListingWaitsForItsMessageToLeaveBeforeItsProcessEnds() throws {
        guard pythonCanImportZMQ() else {
            return XCTFail("\(Self.python) cannot import zmq: run `sh scripts/install-dependencies.sh` (Debian's python3-zmq)")
        }
        let (port, reader) = try descriptorReadingPort(named: "descriptor-listing-late")
        defer { port.invalidate() }
        loop.add(port, to: .default)
        let path = String(port.remote.address.rawValue.dropFirst("ipc://".count))
        let hidden = path + ".hidden"
        XCTAssertEqual(rename(path, hidden), 0, "renaming \(path): errno \(errno)")
        defer { _ = rename(hidden, path) } // before the port's invalidation removes it

        // Runs the listing, and puts the port's socket back as the listing's own code (not
        // the interpreter's teardown) first closes a socket or terminates a context.
        let wrapper = """
            import os, runpy, sys, zmq
            listing, path, hidden = sys.argv[1:]
            def reopening(cls, name):
                real = getattr(cls, name)
                def call(self, *args, **kwargs):
                    if sys._getframe(1).f_code.co_filename == listing and os.path.exists(hidden):
                        os.rename(hidden, path)
                    return real(self, *args, **kwargs)
                setattr(cls, name, call)
            for cls, name in ((zmq.Socket, "close"), (zmq.Context, "term"), (zmq.Context, "destroy")):
                reopening(cls, name)
            runpy.run_path(listing, run_name="__main__")
            """
        let files = try [descriptorListing(path: path), wrapper].enumerated().map { index, text in
            let file = FileManager.default.temporaryDirectory
                .appendingPathComponent("wire-format-descriptors-late-\(index)-\(getpid())-\(UInt32.random(in: .min ... .max)).py")
            try text.write(to: file, atomically: true, encoding: .utf8)
            return file
        }
        defer { for file in files { try? FileManager.default.removeItem(at: file) } }
        let listing = try SpawnedProcess([Self.python, files[1].path, files[0].path, path, hidden], reapedByCaller: true)
        var listingEnd: ChildExit?
        loop.add(try ChildProcessSource(pid: listing.pid) { listingEnd = $0 }, to: .default)
        defer { Self.end(listing, ended: { listingEnd != nil }) }
        XCTAssertTrue(runCurrentLoop(safetyNet: .seconds(30), until: { !reader.read.isEmpty || listingEnd != nil }))
        if access(hidden, F_OK) == 0 { _ = rename(hidden, path) } // the listing ended without closing: too late now
        XCTAssertTrue(runCurrentLoop(safetyNet: .seconds(30), until: { !reader.read.isEmpty }),
                      "listing \(listingEnd.map { "\($0)" } ?? "running"); \(listing.stdout) \(listing.stderr)")
        XCTAssertEqual(reader.read, ["through a pipe"])
        XCTAssertEqual(port.statistics.messagesDropped, 0)
    }

    /// The Python listing of `docs/wire-format.md`'s "Shared memory", run against a named
    /// port with the document's socket path replaced by the port's: it reads the port's
    /// welcome, gives it a sealed ring and sends a note naming 1 MiB in it; the port's
    /// borrowing handler reads every byte where it lies and gives them back. The hex the
    /// section shows is what RunLoopKit writes for the same note and welcome.
    func testTheWireFormatDocumentsSharedMemoryListingHandsANamedPortAComponentInARing() throws {
        guard pythonCanImportZMQ() else {
            return XCTFail("\(Self.python) cannot import zmq: run `sh scripts/install-dependencies.sh` (Debian's python3-zmq)")
        }
        let section = try WireFormatSection("Shared memory")
        let blocks = section.listings
        XCTAssertEqual(blocks.count, 1)
        let token = Array(UInt8(0)..<16)
        let frame = WireCodec.encode(WireMessage(messageID: 7, components: [.sharedData(token: token, start: 0, length: 1 << 20)]))
        XCTAssertEqual(try section.hex(after: "with the token `00 01 … 0f`:"), frame[0])
        XCTAssertEqual(try section.hex(after: "no descriptors:\n  "),
                       Array(DescriptorPacket.welcome.prefix(8)))

        var checked: [Bool] = []
        let port = try LocalPort(name: "ring-listing-\(getpid())-\(UInt32.random(in: .min ... .max))") { _ in nil }
        port.handler = .borrowing { view in
            let bytes = view.firstData ?? UnsafeRawBufferPointer(start: nil, count: 0)
            checked.append(bytes.count == 1 << 20 && bytes.indices.allSatisfy { bytes[$0] == UInt8($0 % 251) })
            return nil
        }
        defer { port.invalidate() }
        loop.add(port, to: .default)
        let (listing, ending) = try runListing(blocks[0], against: port)
        defer { ending.finish(listing) }
        XCTAssertTrue(runCurrentLoop(safetyNet: .seconds(30), until: { !checked.isEmpty }),
                      "listing \(ending.exit.map { "\($0)" } ?? "running"); \(listing.stdout) \(listing.stderr)")
        XCTAssertEqual(checked, [true], "the handler read the listing's 1 MiB where it lies")
        XCTAssertEqual(port.statistics.messagesDropped, 0)
        XCTAssertEqual(port.descriptorReceiver?.counters.ringsMapped, 1)
    }

    /// What a `descriptorReadingPort` read: each descriptor's first bytes (at most 64), and
    /// its number in this process.
    private final class DescriptorReader {
        var read: [String] = []
        var descriptors: [Int32] = []
    }

    /// A named port (`prefix` and a unique tail) that reads each descriptor it gets.
    private func descriptorReadingPort(named prefix: String) throws -> (LocalPort, DescriptorReader) {
        let reader = DescriptorReader()
        let port = try LocalPort(name: "\(prefix)-\(getpid())-\(UInt32.random(in: .min ... .max))") { message in
            for descriptor in message.descriptors {
                reader.descriptors.append(descriptor.descriptor ?? -1)
                var bytes = [UInt8](repeating: 0, count: 64)
                let count = bytes.withUnsafeMutableBytes { Glibc.read(descriptor.descriptor ?? -1, $0.baseAddress, $0.count) }
                reader.read.append(String(decoding: bytes.prefix(max(0, count)), as: UTF8.self))
            }
            return nil
        }
        return (port, reader)
    }

    /// The Python listing of `docs/wire-format.md`'s "Descriptors", its socket path made `path`.
    private func descriptorListing(path: String) throws -> String {
        let document = try String(contentsOf: Self.peerScript.deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/wire-format.md"), encoding: .utf8)
        let start = try XCTUnwrap(document.range(of: "## Descriptors\n")?.upperBound)
        let end = try XCTUnwrap(document[start...].range(of: "\n## ")?.lowerBound)
        let blocks = document[start..<end].components(separatedBy: "```python\n").dropFirst()
        let listing = try XCTUnwrap(blocks.first?.components(separatedBy: "```").first)
        let documented = "/run/user/1000/runloopkit/printer.sock"
        XCTAssertTrue(listing.contains(documented))
        return listing.replacingOccurrences(of: documented, with: path)
    }

    /// Debian's Python, which `scripts/install-dependencies.sh` gives pyzmq (`python3-zmq`);
    /// not whatever `python3` comes first on the PATH.
    /// A section of `docs/wire-format.md` (from its `## heading` to the next): its text and
    /// its Python listings.
    private struct WireFormatSection {
        let text: String
        let listings: [String]

        init(_ heading: String) throws {
            let document = try String(contentsOf: PyZMQPeerTests.peerScript.deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("docs/wire-format.md"), encoding: .utf8)
            let start = try XCTUnwrap(document.range(of: "## \(heading)\n")?.upperBound, heading)
            let end = try XCTUnwrap(document[start...].range(of: "\n## ")?.lowerBound)
            text = String(document[start..<end])
            listings = text.components(separatedBy: "```python\n").dropFirst().map { $0.components(separatedBy: "```").first ?? "" }
        }

        /// The bytes of the first `…` span after `label`, written as hex.
        func hex(after label: String) throws -> [UInt8] {
            let from = try XCTUnwrap(text.range(of: label)?.upperBound, label)
            let span = text[from...].drop { $0 != "`" }.dropFirst().prefix { $0 != "`" }
            return span.split(whereSeparator: \.isWhitespace).compactMap { UInt8($0, radix: 16) }
        }
    }

    /// When a listing's process ended (its `ChildProcessSource` on this thread's loop).
    private final class ListingEnd {
        var exit: ChildExit?
        let file: URL

        init(file: URL) { self.file = file }

        /// Ends the listing if it still runs, and removes its file.
        func finish(_ listing: SpawnedProcess) {
            PyZMQPeerTests.end(listing, ended: { self.exit != nil })
            try? FileManager.default.removeItem(at: file)
        }
    }

    /// Runs `listing` with the document's socket path replaced by `port`'s, its end watched
    /// by this thread's loop in the default mode.
    private func runListing(_ listing: String, against port: LocalPort) throws -> (SpawnedProcess, ListingEnd) {
        let documented = "/run/user/1000/runloopkit/printer.sock"
        XCTAssertTrue(listing.contains(documented))
        let script = listing.replacingOccurrences(of: documented, with: String(port.remote.address.rawValue.dropFirst("ipc://".count)))
        let file = FileManager.default.temporaryDirectory
            .appendingPathComponent("wire-format-listing-\(getpid())-\(UInt32.random(in: .min ... .max)).py")
        try script.write(to: file, atomically: true, encoding: .utf8)
        let ending = ListingEnd(file: file)
        let process = try SpawnedProcess([Self.python, file.path], reapedByCaller: true)
        loop.add(try ChildProcessSource(pid: process.pid) { ending.exit = $0 }, to: .default)
        return (process, ending)
    }

    private static let python = "/usr/bin/python3"

    /// Whether Debian's Python is there and has pyzmq.
    private func pythonCanImportZMQ() -> Bool {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else { return false }
        return (try? runCapturing([Self.python, "-c", "import zmq"]))?.exitStatus == 0
    }

    /// Ends `process` (SIGTERM, then SIGKILL after 10 s) unless `ended`, and runs this
    /// thread's loop until its `ChildProcessSource` reaped it, then waits for the end of its
    /// output.
    private static func end(_ process: SpawnedProcess, ended: () -> Bool) {
        if !ended() {
            kill(process.pid, SIGTERM)
            if !runCurrentLoop(safetyNet: .seconds(10), until: ended) { kill(process.pid, SIGKILL) }
            guard runCurrentLoop(safetyNet: .seconds(30), until: ended) else { return XCTFail("\(process.pid) was not reaped") }
        }
        process.waitForOutput()
    }
}
