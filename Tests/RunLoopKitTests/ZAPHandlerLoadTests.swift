import Dispatch
import Foundation
import Glibc
import Logging
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopZMQ
import XCTest

/// The process's ZAP handler under load (`docs/security.md`, "A refused client"): many
/// handshakes at once, listed and unlisted, each answered right and every refusal counted;
/// `reload()` while clients handshake; and a log backend that blocks, which must stall no
/// handshake (refusals are logged by a thread of their own, at most a line a port a second).
final class ZAPHandlerLoadTests: XCTestCase {
    private static let scenarioVariable = "RUNLOOPKIT_ZAP_LOAD_SCENARIO"

    override func setUp() {
        super.setUp()
        guard let scenario = childScenario(ZAPHandlerLoadTests.scenarioVariable) else { return }
        endChild { scenario == "slow-log" ? ZAPHandlerLoadTests.runSlowLogScenario() : childReport(false, "unknown \(scenario)") }
    }

    /// A CURVE port on tcp loopback with `clients` as its allow-list, added to this thread's
    /// loop, that answers each request with "ok:" and its text.
    private struct Server {
        let keys: PortKeyPair
        let port: LocalPort
        let address: PortAddress

        init(allowing clients: PortClientAllowList) throws {
            keys = try PortKeyPair.generate()
            port = try LocalPort { message in LoopMessage(id: 0, text: "ok:\(message.text ?? "")") }
            try port.requireCurve(keys, allowing: clients)
            address = try port.bind(tcp: "tcp://127.0.0.1:*")
            PortDirectory.shared.removeAlias(address) // a peer's connection, not the in-process shortcut
            ThreadRunLoop.current.add(port, to: .default)
        }
    }

    /// One request per client, each from a thread (and a connection) of its own, all started
    /// together, while this thread's loop serves the port; their outcomes, in order.
    private static func requestAll(_ server: Server, as clients: [PortKeyPair], timeout: Duration = .seconds(20))
        -> [Result<String, PortError>] {
        let outcomes = LockedValue<[Result<String, PortError>?]>(Array(repeating: nil, count: clients.count))
        let finished = InputSource {}
        ThreadRunLoop.current.add(finished, to: .default)
        defer { finished.invalidate() }
        let (address, serverKey) = (server.address, server.keys.publicKey)
        let threads = clients.enumerated().map { index, client in
            TestThread {
                let outcome = Result { () throws(PortError) in
                    try RemotePort(address, curveServerKey: serverKey, clientKeys: client)
                        .sendRequest(LoopMessage(id: 3, text: "\(index)"), sendTimeout: timeout, receiveTimeout: timeout).text ?? ""
                }
                outcomes.withLock { $0[index] = outcome }
                finished.signalAndWake()
            }
        }
        let done = runCurrentLoop(safetyNet: timeout * 3) { outcomes.withLock { $0.allSatisfy { $0 != nil } } }
        threads.forEach { $0.join() }
        XCTAssertTrue(done, "every request ended")
        return outcomes.withLock { $0.map { $0 ?? .failure(.invalidated) } }
    }

    /// The ZAP handler's refusals so far, of every port in the process.
    private static func refusalsAnswered() throws -> Int { try ZMQAuthenticator.shared().answered.denied }

    private static func isRefusal(_ outcome: Result<String, PortError>) -> Bool {
        if case .failure(.notAuthorized) = outcome { return true }
        return false
    }

    func testManyClientsHandshakingAtOnceListedOrNotAreEachAnsweredRightAndEveryRefusalIsCounted() throws {
        let listed = try (0..<8).map { _ in try PortKeyPair.generate() }
        let strangers = try (0..<8).map { _ in try PortKeyPair.generate() }
        let server = try Server(allowing: try PortClientAllowList(publicKeys: listed.map(\.publicKey)))
        defer { server.port.invalidate() }
        let refusedBefore = try Self.refusalsAnswered()
        // Listed and unlisted interleaved, so that their handshakes overlap.
        let clients = zip(listed, strangers).flatMap { [$0, $1] }
        let outcomes = Self.requestAll(server, as: clients)
        for (index, outcome) in outcomes.enumerated() {
            if index % 2 == 0 {
                XCTAssertEqual(try? outcome.get(), "ok:\(index)", "listed client \(index): \(outcome)")
            } else {
                XCTAssertTrue(Self.isRefusal(outcome), "unlisted client \(index): \(outcome)")
            }
        }
        let refused = server.port.statistics.clientsRefused
        XCTAssertGreaterThanOrEqual(refused, strangers.count, "each unlisted client was refused at least once")
        XCTAssertEqual(refused, try Self.refusalsAnswered() - refusedBefore, "every refusal the handler answered is counted, exactly")
        XCTAssertEqual(server.port.statistics.messagesReceived, listed.count)
    }

    func testReloadingTheListWhileClientsHandshakeNeverRefusesAListedClient() throws {
        var template = Array("/tmp/runloopkit-zap-load-XXXXXX".utf8CString)
        let directory = String(cString: try XCTUnwrap(mkdtemp(&template)))
        defer { _ = try? FileManager.default.removeItem(atPath: directory) }
        let listed = try (0..<6).map { _ in try PortKeyPair.generate() }
        for (index, keys) in listed.enumerated() { try keys.writePublicKey(to: "\(directory)/client-\(index).key") }
        let latecomer = try PortKeyPair.generate()
        let clients = try PortClientAllowList(directory: directory)
        let server = try Server(allowing: clients)
        defer { server.port.invalidate() }

        // Reload without pause until the requests are done.
        let reloading = LockedValue((stop: false, reloads: 0, failure: String?.none))
        let reloader = TestThread {
            while !reloading.withLock({ $0.stop }) {
                do { try clients.reload() } catch { reloading.withLock { $0.failure = "\(error)" } }
                reloading.withLock { $0.reloads += 1 }
            }
        }
        // The clients start once the reloader is reloading, so that their handshakes meet
        // reloads (how many overlap is the scheduler's: a busy machine may run fewer, which
        // is no failure of the port).
        let deadline = Deadline.after(.seconds(20))
        while reloading.withLock({ $0.reloads }) == 0, Deadline.now() < deadline { sched_yield() }
        let outcomes = Self.requestAll(server, as: listed + [latecomer, latecomer] + listed)
        reloading.withLock { $0.stop = true }
        reloader.join()
        let (reloads, failure) = reloading.withLock { ($0.reloads, $0.failure) }
        XCTAssertNil(failure)
        XCTAssertGreaterThan(reloads, 0, "the reloader ran")
        for (index, outcome) in outcomes.enumerated() where index != 6 && index != 7 {
            XCTAssertEqual(try? outcome.get(), "ok:\(index)", "listed client \(index) during reloads: \(outcome)")
        }
        XCTAssertTrue(Self.isRefusal(outcomes[6]) && Self.isRefusal(outcomes[7]), "\(outcomes[6]), \(outcomes[7])")

        // Its key added and the list reloaded, the latecomer is admitted.
        try latecomer.writePublicKey(to: "\(directory)/latecomer.key")
        try clients.reload()
        XCTAssertEqual(try? Self.requestAll(server, as: [latecomer])[0].get(), "ok:0")
    }

    func testALogBackendThatBlocksStallsNoHandshakeAndEveryRefusalIsLoggedOnceItGoesOn() throws {
        let report = try expectPassingChild(self, test: #function, variable: Self.scenarioVariable, scenario: "slow-log")
        XCTAssertTrue(report.contains("PASS the listed clients got their replies while the log was blocked"), report)
    }

    // MARK: - The slow log scenario (in the child)

    /// A log backend whose refusal lines block until `open()`: the first one waits there.
    private final class SlowLog: @unchecked Sendable {
        let entered = DispatchSemaphore(value: 0) // a refusal line reached the backend
        let written = DispatchSemaphore(value: 0) // a refusal line was recorded
        private let gate = DispatchSemaphore(value: 0)
        private let state = LockedValue((isOpen: false, lines: [[String: String]]()))

        func write(_ message: String, _ metadata: Logger.Metadata) {
            guard message.contains("refused") else { return }
            entered.signal()
            if !state.withLock({ $0.isOpen }) { gate.wait() }
            var line = metadata.mapValues { "\($0)" }
            line["message"] = message
            state.withLock { $0.lines.append(line) }
            written.signal()
        }

        func open() {
            state.withLock { $0.isOpen = true }
            gate.signal()
        }

        var lines: [[String: String]] { state.withLock { $0.lines } }
        /// The refusals the lines so far account for.
        var refusalsLogged: Int { lines.reduce(0) { $0 + (Int($1["refused"] ?? "1") ?? 0) } }
    }

    private struct SlowLogHandler: LogHandler {
        let sink: SlowLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info
        var metadataProvider: Logger.MetadataProvider?

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            sink.write("\(event.message)", metadata.merging(event.metadata ?? [:]) { $1 })
        }
    }

    private static func runSlowLogScenario() -> Bool {
        let sink = SlowLog()
        LoggingSystem.bootstrap { _ in SlowLogHandler(sink: sink) }
        do {
            let listed = try PortKeyPair.generate()
            let strangers = try (0..<4).map { _ in try PortKeyPair.generate() }
            let server = try Server(allowing: try PortClientAllowList(publicKeys: [listed.publicKey]))
            let refusedBefore = try refusalsAnswered()
            var passed = true

            let first = requestAll(server, as: [strangers[0]], timeout: .seconds(10))[0]
            passed = childReport(isRefusal(first), "the first stranger is refused: \(first)") && passed
            let blocked = sink.entered.wait(timeout: .now() + 10) == .success
            passed = childReport(blocked, "its log line reached the backend, which blocks") && passed

            // While the backend blocks: listed clients and strangers, at once.
            let clients = [listed, strangers[1], listed, strangers[2], strangers[3], listed]
            let outcomes = requestAll(server, as: clients, timeout: .seconds(10))
            let answeredRight = outcomes.enumerated().allSatisfy { index, outcome in
                clients[index] == listed ? (try? outcome.get()) == "ok:\(index)" : isRefusal(outcome)
            }
            passed = childReport(answeredRight, "the listed clients got their replies while the log was blocked, "
                                 + "and the strangers their refusal: \(outcomes)") && passed

            let refused = server.port.statistics.clientsRefused
            passed = childReport(refused == (try refusalsAnswered()) - refusedBefore && refused >= strangers.count,
                                 "every refusal is counted, exactly: \(refused)") && passed

            sink.open()
            let limit = Deadline.after(.seconds(20))
            while sink.refusalsLogged < refused && Deadline.now() < limit {
                _ = sink.written.wait(timeout: .now() + 1)
            }
            let lines = sink.lines
            passed = childReport(sink.refusalsLogged == refused, "the log accounts for every refusal: \(lines)") && passed
            // (It may count the stranger's second try too, if that came before the line was written.)
            passed = childReport(lines.first?["client"] == strangers[0].publicKey, "the first line names the first stranger") && passed
            passed = childReport(lines.count < refused, "the later refusals share lines: \(lines.count) for \(refused)") && passed
            server.port.invalidate()
            return passed
        } catch {
            return childReport(false, "\(error)")
        }
    }
}
