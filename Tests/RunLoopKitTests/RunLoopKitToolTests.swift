import Dispatch
import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopWire
import XCTest

/// The `runloopkit` tool, run as a process against a named port served by a loop thread
/// of this process. The tool is built by `swift build` or `swift test` (a test target cannot
/// depend on an executable): without it these tests are skipped, except on CI (CI=true),
/// where they fail (see `builtExecutable`).
final class RunLoopKitToolTests: XCTestCase {
    /// The named port the tool talks to: it records what it gets, and replies to a
    /// request with "echo: " and the request's text.
    private final class EchoServer: @unchecked Sendable {
        let name = "tool-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let received = LockedValue<[LoopMessage]>([])
        let arrived = DispatchSemaphore(value: 0)
        private let port = LockedValue<LocalPort?>(nil)
        private var thread: LoopThread?

        init() {
            let (name, received, arrived, port) = (name, received, arrived, port)
            thread = LoopThread { loop in
                let served = try! LocalPort(name: name) { message in
                    received.withLock { $0.append(message) }
                    arrived.signal()
                    return LoopMessage(id: message.id, text: "echo: \(message.text ?? "")")
                }
                loop.add(served, to: .default)
                port.withLock { $0 = served }
            }
        }

        func stop() {
            port.withLock { $0?.invalidate() }
            thread?.stop()
        }
    }

    private typealias ToolRun = ExecutableRun

    private func runTool(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws -> ToolRun {
        // The runtime directory this process uses.
        try runBuiltExecutable("runloopkit", arguments, environment: ["RUNLOOPKIT_RUNTIME_DIR": try RuntimeDirectory.path()],
                               file: file, line: line)
    }

    // MARK: - keygen

    func testKeygenWritesAKeyPairOnlyItsOwnerCanReadAndItsPublicKeyAndNeverOverwrites() throws {
        let path = "/tmp/runloopkit-keygen-\(getpid())-\(UInt32.random(in: .min ... .max))"
        defer { unlink(path); unlink(path + ".pub") }
        let run = try runTool(["keygen", path, "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let publicKey = try XCTUnwrap(run.json?["publicKey"] as? String, run.stdout)
        var info = stat()
        XCTAssertEqual(stat(path, &info), 0)
        XCTAssertEqual(String(info.st_mode & 0o777, radix: 8), "600")
        XCTAssertEqual(try PortKeyPair(contentsOf: path).publicKey, publicKey)
        let text = try String(contentsOfFile: path + ".pub", encoding: .utf8)
        XCTAssertTrue(text.contains("public-key = \"\(publicKey)\""), text)
        XCTAssertFalse(text.contains("secret-key"), text)

        let again = try runTool(["keygen", path])
        XCTAssertEqual(again.status, 1, "an existing key file is never overwritten: \(again)")
        XCTAssertEqual(try PortKeyPair(contentsOf: path).publicKey, publicKey)
    }

    // MARK: - ports

    func testPortsListsALiveNamedPortWithItsOwnerAndADeadOneAsDead() throws {
        let server = EchoServer()
        defer { server.stop() }
        let dead = "tool-dead-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let directory = try RuntimeDirectory.path()
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(directory)/\(dead).lock", contents: Data("999999\n".utf8)))
        defer { unlink("\(directory)/\(dead).lock") }

        let text = try runTool(["ports"])
        XCTAssertEqual(text.status, 0, text.stderr)
        let lines = text.stdout.split(separator: "\n")
        XCTAssertEqual(lines.first, "runtime directory: \(directory)")
        let live = try XCTUnwrap(lines.first { $0.hasPrefix(server.name + " ") }, text.stdout)
        XCTAssertEqual(live.split(separator: " ").suffix(2), ["\(getpid())", "live"])
        let stale = try XCTUnwrap(lines.first { $0.hasPrefix(dead + " ") }, text.stdout)
        XCTAssertEqual(stale.split(separator: " ").suffix(2), ["999999", "dead"])

        let json = try XCTUnwrap(try runTool(["ports", "--json"]).json)
        XCTAssertEqual(json["runtimeDirectory"] as? String, directory)
        let ports = try XCTUnwrap(json["ports"] as? [[String: Any]])
        let entry = try XCTUnwrap(ports.first { $0["name"] as? String == server.name })
        XCTAssertEqual(entry["pid"] as? Int, Int(getpid()))
        XCTAssertEqual(entry["alive"] as? Bool, true)
        XCTAssertEqual(entry["address"] as? String, "ipc://\(directory)/\(server.name).sock")
        XCTAssertEqual(ports.first { $0["name"] as? String == dead }?["alive"] as? Bool, false)
    }

    func testPortsWithStatsShowsEachLivePortsRightsOutstandingAndADeadOnesAsDashes() throws {
        let server = EchoServer()
        defer { server.stop() }
        try RemotePort(named: server.name).send(LoopMessage(id: 1, text: "one"))
        waitOrFail(server.arrived, "the message")
        let dead = "tool-dead-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let directory = try RuntimeDirectory.path()
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(directory)/\(dead).lock", contents: Data("999999\n".utf8)))
        defer { unlink("\(directory)/\(dead).lock") }

        let text = try runTool(["ports", "--stats"])
        XCTAssertEqual(text.status, 0, text.stderr)
        let lines = text.stdout.split(separator: "\n")
        XCTAssertEqual(lines.dropFirst().first?.split(separator: " ").suffix(4), ["STATE", "RIGHTS", "RECEIVED", "DROPPED"])
        let live = try XCTUnwrap(lines.first { $0.hasPrefix(server.name + " ") }, text.stdout)
        XCTAssertEqual(live.split(separator: " ").suffix(4), ["live", "0", "1", "0"])
        let stale = try XCTUnwrap(lines.first { $0.hasPrefix(dead + " ") }, text.stdout)
        XCTAssertEqual(stale.split(separator: " ").suffix(4), ["dead", "-", "-", "-"])

        let json = try XCTUnwrap(try runTool(["ports", "--stats", "--json"]).json)
        let ports = try XCTUnwrap(json["ports"] as? [[String: Any]])
        let entry = try XCTUnwrap(ports.first { $0["name"] as? String == server.name })
        let statistics = try XCTUnwrap(entry["statistics"] as? [String: Any])
        XCTAssertEqual(statistics["rightsOutstanding"] as? Int, 0)
        XCTAssertEqual(statistics["messagesReceived"] as? Int, 1)
        XCTAssertNil(ports.first { $0["name"] as? String == dead }?["statistics"])
        XCTAssertEqual(server.received.withLock { $0.map(\.id) }, [1], "the handler never saw a query")
    }

    // MARK: - send

    func testSendDeliversTextOrAFilesBytesToTheNamedPort() throws {
        let server = EchoServer()
        defer { server.stop() }
        let sent = try runTool(["send", server.name, "--id", "3", "--data", "hi"])
        XCTAssertEqual(sent.status, 0, sent.stderr)
        XCTAssertEqual(sent.stdout, "sent message 3 (2 bytes) to '\(server.name)'\n")
        waitOrFail(server.arrived, "the message")

        let bytes: [UInt8] = [0, 1, 2, 0xFF]
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("runloopkit-tool-\(getpid()).bin").path
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        defer { unlink(path) }
        let json = try runTool(["send", server.name, "--id=-4", "--file", path, "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        XCTAssertEqual(json.json?["bytes"] as? Int, 4)
        waitOrFail(server.arrived, "the file's message")

        let received = server.received.withLock { $0 }
        XCTAssertEqual(received.map(\.id), [3, -4])
        XCTAssertEqual(received.first?.text, "hi")
        XCTAssertEqual(received.last?.data, [bytes])
        XCTAssertEqual(received.map(\.replyPort), [nil, nil], "a plain message, not a request")
    }

    // MARK: - request

    func testRequestPrintsTheReplyAndLeavesNoNameBehind() throws {
        let server = EchoServer()
        defer { server.stop() }
        let namesBefore = try PortRegistry.registeredNames().map(\.name)
        let text = try runTool(["request", server.name, "--id", "7", "--data", "hello"])
        XCTAssertEqual(text.status, 0, text.stderr)
        XCTAssertEqual(text.stdout, "echo: hello\n")
        XCTAssertEqual(server.received.withLock { $0 }.map(\.id), [7])

        let json = try runTool(["request", server.name, "--id", "8", "--data", "again", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let reply = try XCTUnwrap(json.json?["reply"] as? [String: Any], json.stdout)
        XCTAssertEqual(reply["id"] as? Int, 8, "a reply carries its request's id")
        XCTAssertEqual((reply["components"] as? [[String: Any]])?.first?["data"] as? String, "echo: again")
        XCTAssertNotNil(json.json?["roundTripMicroseconds"] as? Double)

        // The replies came back over the requests' connections: the tool named nothing.
        XCTAssertEqual(try PortRegistry.registeredNames().filter { [text.pid, json.pid].contains($0.ownerPID ?? 0) }, [])
        // Nor anything without a pid. (Other processes on the machine may register names meanwhile.)
        let newNames = try PortRegistry.registeredNames().filter { !namesBefore.contains($0.name) }
        XCTAssertEqual(newNames.filter { $0.ownerPID == nil }, [])
    }

    // MARK: - ping

    func testPingReportsRoundTripPercentiles() throws {
        let server = EchoServer()
        defer { server.stop() }
        let run = try runTool(["ping", server.name, "--count", "20", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let json = try XCTUnwrap(run.json, run.stdout)
        XCTAssertEqual(json["requests"] as? Int, 20)
        XCTAssertEqual(json["replies"] as? Int, 20)
        XCTAssertEqual(json["timeouts"] as? Int, 0)
        let roundTrip = try XCTUnwrap(json["roundTripMicroseconds"] as? [String: Double], run.stdout)
        let (low, p50, p99, high) = (roundTrip["min"]!, roundTrip["p50"]!, roundTrip["p99"]!, roundTrip["max"]!)
        XCTAssertTrue(0 < low && low <= p50 && p50 <= p99 && p99 <= high, "\(roundTrip)")
        XCTAssertEqual(server.received.withLock { $0 }.count, 21, "one warm-up and twenty measured requests")

        let text = try runTool(["ping", server.name, "--count", "3", "--warmup", "0"])
        XCTAssertEqual(text.status, 0, text.stderr)
        XCTAssertTrue(text.stdout.hasPrefix("ping '\(server.name)': 3 requests, 3 replies, 0 timed out\n"), text.stdout)
        XCTAssertTrue(text.stdout.contains("round trip (µs): min "), text.stdout)
    }

    // MARK: - Errors and exit codes

    func testAnUnknownNameExitsWith2AndOneLineOnStderr() throws {
        let name = "tool-nobody-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        for command in [["send", name, "--id", "1"], ["request", name, "--id", "1"], ["ping", name]] {
            let run = try runTool(command)
            XCTAssertEqual(run.status, 2, "\(command): \(run.stderr)")
            XCTAssertEqual(run.stderrLines.count, 1, run.stderr)
            XCTAssertTrue(run.stderr.hasPrefix("runloopkit: unknown port name '\(name)'"), run.stderr)
            XCTAssertEqual(run.stdout, "")
        }
        let json = try runTool(["send", name, "--id", "1", "--json"])
        XCTAssertEqual(json.status, 2)
        let error = try XCTUnwrap(json.json?["error"] as? [String: Any], json.stdout)
        XCTAssertEqual(error["kind"] as? String, "unknownName")
        XCTAssertEqual(error["exitCode"] as? Int, 2)
    }

    func testANameWhoseOwnerDiedExitsWith3() throws {
        let name = "tool-dead-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let directory = try RuntimeDirectory.path()
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(directory)/\(name).lock", contents: Data("999999\n".utf8)))
        defer { unlink("\(directory)/\(name).lock") }
        let run = try runTool(["request", name, "--id", "1"])
        XCTAssertEqual(run.status, 3, run.stderr)
        XCTAssertEqual(run.stderrLines, ["runloopkit: the owner of port '\(name)' (pid 999999) is dead: the name is stale"])
    }

    func testARequestNobodyAnswersExitsWith4() throws {
        // A named port on this thread, whose loop does not run while the tool waits.
        let name = "tool-silent-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let port = try LocalPort(name: name) { _ in nil }
        defer { port.invalidate() }
        let run = try runTool(["request", name, "--id", "1", "--timeout", "0.3"])
        XCTAssertEqual(run.status, 4, run.stderr)
        XCTAssertEqual(run.stderrLines, ["runloopkit: timed out: no reply from '\(name)' within 0.3 s"])
        let ping = try runTool(["ping", name, "--count", "2", "--warmup", "0", "--timeout", "0.2", "--json"])
        XCTAssertEqual(ping.status, 4, ping.stderr)
        XCTAssertEqual(ping.json?["timeouts"] as? Int, 2, "the partial result is printed first")
        XCTAssertEqual(ping.stderrLines.count, 1, ping.stderr)
    }

    // MARK: - stats

    func testStatsPrintsALivePortsRightsOutstanding() throws {
        let server = EchoServer()
        defer { server.stop() }
        try RemotePort(named: server.name).send(LoopMessage(id: 1, text: "one"))
        waitOrFail(server.arrived, "the message")

        let text = try runTool(["stats", server.name])
        XCTAssertEqual(text.status, 0, text.stderr)
        let lines = text.stdout.split(separator: "\n")
        XCTAssertEqual(lines.first, "port '\(server.name)' (ipc://\(try RuntimeDirectory.path())/\(server.name).sock)")
        XCTAssertTrue(lines.contains("rights outstanding  0"), text.stdout)
        XCTAssertTrue(lines.contains("messages received   1"), text.stdout)

        let json = try runTool(["stats", server.name, "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let statistics = try XCTUnwrap(json.json?["statistics"] as? [String: Any], json.stdout)
        XCTAssertEqual(statistics["rightsOutstanding"] as? Int, 0)
        XCTAssertEqual(statistics["messagesReceived"] as? Int, 1, "the queries are not the port's traffic")
        XCTAssertEqual(statistics["format"] as? Int, 1)
        XCTAssertEqual(server.received.withLock { $0.map(\.id) }, [1], "the handler never saw a query")
    }

    func testStatsOfAPortThatDoesNotAnswerQueriesTimesOutSayingSo() throws {
        // A port over tcp drops a query as a port of 0.1.0 does (it drops the unknown kind):
        // either way the query goes unanswered.
        let served = LockedValue<(LocalPort, PortAddress)?>(nil)
        let thread = LoopThread { loop in
            let port = try! LocalPort { _ in nil }
            loop.add(port, to: .default)
            served.withLock { $0 = (port, try! port.bind(tcp: "tcp://127.0.0.1:*")) }
        }
        defer {
            served.withLock { $0?.0.invalidate() }
            thread.stop()
        }
        let address = try XCTUnwrap(served.withLock { $0?.1 })
        let run = try runTool(["stats", address.rawValue, "--timeout", "0.5"])
        XCTAssertEqual(run.status, 4, run.stderr)
        XCTAssertEqual(run.stderrLines.count, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("the port '\(address.rawValue)' does not answer statistics queries within 0.5 s"),
                      run.stderr)
        XCTAssertEqual(run.stdout, "")

        let name = "tool-nobody-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let unknown = try runTool(["stats", name])
        XCTAssertEqual(unknown.status, 2, unknown.stderr)
        XCTAssertTrue(unknown.stderr.hasPrefix("runloopkit: unknown port name '\(name)'"), unknown.stderr)
    }

    // MARK: - version

    /// The release is named in three places a user reads: `runloopkit --version`, the
    /// latest version heading of CHANGELOG.md, and the README's version line.
    func testVersionNamesTheLatestReleaseOfTheChangelogAndTheReadme() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let changelog = try String(contentsOf: root.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let heading = try XCTUnwrap(changelog.split(separator: "\n").first { $0.hasPrefix("## [0") || $0.hasPrefix("## [1") },
                                    "CHANGELOG.md has no release heading")
        let release = String(heading.dropFirst("## [".count).prefix { $0 != "]" })
        let run = try runTool(["--version"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "\(release) (wire format \(WireCodec.version))")
        XCTAssertTrue(readme.contains("This is RunLoopKit \(release)"), "the README's version line names \(release)")
    }

    func testBadArgumentsExitWith1() throws {
        for arguments in [["send"], ["send", "x"], ["send", "x", "--id", "1", "--data", "a", "--file", "b"],
                          ["ping", "x", "--count", "0"], ["send", "../x", "--id", "1"], ["request", "x", "--id", "nine"],
                          ["send", "x", "--id", "1", "--file", "/nonexistent/\(getpid())"], ["bogus"]] {
            let run = try runTool(arguments)
            XCTAssertEqual(run.status, 1, "\(arguments): \(run.stderr)")
            XCTAssertFalse(run.stderr.isEmpty, "\(arguments)")
        }
        XCTAssertEqual(try runTool(["--help"]).status, 0)
    }
}
