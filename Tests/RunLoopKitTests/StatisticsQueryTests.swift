import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopWire
import XCTest

/// Statistics queries (wire kind 6, `docs/wire-format.md`, "Statistics queries"): a port's
/// library answers them with the port's figures, to its own user only, and its handler
/// never sees them.
final class StatisticsQueryTests: XCTestCase {
    private static let ownerVariable = "RUNLOOPKIT_STATISTICS_QUERY_OWNER"
    private static let python = "/usr/bin/python3"

    /// In the owner process (`startOwner`): a named port whose deferring handler keeps every
    /// request's right and prints "held N" as it does, and prints "handler saw ID" for
    /// every message it is given, requests and plain messages alike.
    override func setUp() {
        super.setUp()
        guard let name = childScenario(Self.ownerVariable) else { return }
        endChild {
            final class Held { var rights: [RightBox] = [] }
            final class RightBox {
                var right: ReplyRight?
                init(_ right: consuming ReplyRight) { self.right = consume right }
            }
            let held = Held()
            do {
                let loop = ThreadRunLoop.current
                let port = try LocalPort(name: name, handling: .deferring { message, right in
                    print("handler saw \(message.id)")
                    if let right {
                        held.rights.append(RightBox(right))
                        print("held \(held.rights.count)")
                    }
                    fflush(nil)
                })
                loop.add(port, to: .default)
                print("ready")
                fflush(nil)
                while true { _ = loop.run(mode: .default, before: .distantFuture) }
            } catch {
                return childReport(false, "the owner could not serve '\(name)': \(error)")
            }
        }
    }

    func testAPortInAnotherProcessHoldingThreeRightsAnswersAStatisticsQueryWithThreeRightsOutstanding() throws {
        let name = "stats-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let owner = try startNameOwner(name, variable: Self.ownerVariable, test: #function)
        defer { kill(owner.pid, SIGKILL) }
        let remote = try RemotePort(named: name)
        let requests = (0..<3).map { index in
            Task { try await remote.request(LoopMessage(id: 10 + Int32(index)), receiveTimeout: .seconds(120)) }
        }
        defer { for request in requests { request.cancel() } }
        XCTAssertTrue(owner.waitForLine("held 3"), owner.stdout)

        let report = try remote.statistics(timeout: .seconds(20))
        XCTAssertEqual(report.rightsOutstanding, 3)
        XCTAssertEqual(report.messagesReceived, 3, "the query is not the port's traffic")
        XCTAssertEqual(report.format, 1)
        XCTAssertEqual(try remote.statistics(timeout: .seconds(20)), report, "a second query counts nothing either")

        // A message sent after the queries were answered: the handler saw the three
        // requests and it, never a query.
        try remote.send(LoopMessage(id: 99))
        XCTAssertTrue(owner.waitForLine("handler saw 99"), owner.stdout)
        let seen = owner.stdout.split(separator: "\n").filter { $0.hasPrefix("handler saw ") }
        XCTAssertEqual(Set(seen.prefix(3)), ["handler saw 10", "handler saw 11", "handler saw 12"])
        XCTAssertEqual(seen.count, 4, owner.stdout)
        XCTAssertEqual(seen.last, "handler saw 99")
    }

    /// Queries `remote` from a thread of its own while this thread's loop runs (serving the
    /// port under test) until `until` holds and the query returned.
    private func queryFromAnotherThread(_ remote: RemotePort, timeout: Duration,
                                        until condition: () -> Bool = { true }) -> Result<PortStatisticsReport, PortError>? {
        let result = LockedValue<Result<PortStatisticsReport, PortError>?>(nil)
        // The query's end signals this source, so that this thread's loop returns at once.
        let done = InputSource {}
        ThreadRunLoop.current.add(done, to: .default)
        defer { done.invalidate() }
        let thread = TestThread {
            do throws(PortError) {
                let report = try remote.statistics(timeout: timeout)
                result.withLock { $0 = .success(report) }
            } catch {
                result.withLock { $0 = .failure(error) }
            }
            done.signalAndWake()
        }
        defer { thread.join() }
        XCTAssertTrue(runCurrentLoop(safetyNet: .seconds(60)) { condition() && result.withLock { $0 != nil } })
        return result.withLock { $0 }
    }

    func testAStatisticsQueryOverIPCOrInProcessNeverReachesTheHandlerNorCountsAsItsTraffic() throws {
        let name = "stats-local-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        var seen: [Int32] = []
        let port = try LocalPort(name: name, handling: .borrowing { message in
            seen.append(message.id)
            return nil
        })
        let loop = ThreadRunLoop.current
        loop.add(port, to: .default)
        defer { port.invalidate() }
        let handled = loop.counters.messagesHandled

        let overIPC = try XCTUnwrap(queryFromAnotherThread(try RemotePort(named: name), timeout: .seconds(20))).get()
        let inProcess = try XCTUnwrap(queryFromAnotherThread(RemotePort(port.inProcessAddress), timeout: .seconds(20))).get()
        XCTAssertEqual(overIPC.messagesReceived, 0)
        XCTAssertEqual(inProcess, overIPC)
        XCTAssertEqual(seen, [], "the handler never sees a query")
        XCTAssertEqual(port.statistics.messagesReceived, 0)
        XCTAssertEqual(port.statistics.messagesDropped, 0)
        XCTAssertEqual(loop.counters.messagesHandled, handled, "nor does the loop count one handled")
    }

    func testAStatisticsQueryOverTCPIsDroppedAndCountedNotAnswered() throws {
        let port = try LocalPort { _ in
            XCTFail("the handler never sees a query")
            return nil
        }
        let loop = ThreadRunLoop.current
        loop.add(port, to: .default)
        defer { port.invalidate() }
        let address = try port.bind(tcp: "tcp://127.0.0.1:*")

        let result = queryFromAnotherThread(RemotePort(address), timeout: .seconds(2)) { port.statistics.messagesDropped == 1 }
        guard case .failure(let error) = result else { return XCTFail("answered: \(String(describing: result))") }
        XCTAssertEqual(error, .receiveTimedOut(address), "not answered")
        XCTAssertEqual(port.statistics.messagesDropped, 1, "counted on the port")
        XCTAssertEqual(port.statistics.statisticsQueriesRefused, 1, "as a refused query")
        XCTAssertEqual(port.statistics.messagesReceived, 0)
    }

    /// The rule behind every answer: no metadata is this process (inproc, which the tests
    /// above take); an ipc peer's "Peer-Address" ends with its `SO_PEERCRED` uid, which must
    /// be this process's; a tcp peer's is an address, which proves no user.
    func testAStatisticsQueryIsAnsweredOnlyToThisProcessOrAnIPCPeerOfTheSameUID() {
        func answered(_ text: String?, uid: UInt32 = 1000) -> Bool {
            guard let text else { return LocalPort.statisticsQueryPeerIsUser(nil, uid: uid) }
            return Array(text.utf8).withUnsafeBytes { LocalPort.statisticsQueryPeerIsUser($0, uid: uid) }
        }
        XCTAssertTrue(answered(nil), "this process, over inproc")
        XCTAssertTrue(answered("localhost:1000:1000:4242"), "an ipc peer of this uid")
        XCTAssertTrue(answered("localhost:0:0:1", uid: 0))
        XCTAssertFalse(answered("localhost:1001:1000:4242"), "an ipc peer of another uid")
        XCTAssertFalse(answered("localhost:0:0:1"), "root is another user too")
        XCTAssertFalse(answered("127.0.0.1"), "a tcp peer")
        XCTAssertFalse(answered("::1"))
        XCTAssertFalse(answered("fe80::1:1000:2"), "an IPv6 address is no credential")
        XCTAssertFalse(answered(""))
    }

    /// Runs as root, or as a user with passwordless sudo (as `PortDirectoryTests`' test of
    /// another user does); elsewhere it fails with the reason, never passes or skips. The
    /// port's socket is linked, open to all, into a directory another user can reach: the
    /// runtime directory itself is closed to others.
    func testAStatisticsQueryFromAnotherUIDOverIPCIsDroppedAndCountedNotAnswered() throws {
        guard let nobody = PortDirectoryTests.asNobody else {
            return XCTFail("acting as another user needs root or passwordless sudo, and /usr/bin/setpriv")
        }
        let name = "stats-uid-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let port = try LocalPort(name: name) { _ in
            XCTFail("the handler never sees a query")
            return nil
        }
        ThreadRunLoop.current.add(port, to: .default)
        defer { port.invalidate() }
        let open = NSTemporaryDirectory() + "rlk-stats-\(UInt32.random(in: 0...UInt32.max))"
        XCTAssertEqual(mkdir(open, 0o755), 0)
        chmod(open, 0o755)
        let link = open + "/port.sock"
        XCTAssertEqual(Glibc.link("\(try RuntimeDirectory.path())/\(name).sock", link), 0, "a hard link to the socket")
        XCTAssertEqual(chmod(link, 0o666), 0)
        defer {
            unlink(link)
            rmdir(open)
        }
        let query = """
            import struct, sys, zmq
            dealer = zmq.Context.instance().socket(zmq.DEALER)
            dealer.linger = 0
            dealer.connect("ipc://" + sys.argv[1])
            dealer.send(struct.pack("<3sBBBHiQH", b"RLK", 3, 6, 0, 0, 0, 0x5157, 0))
            print("answered" if dealer.poll(int(sys.argv[2])) else "no answer", flush=True)
            """
        func ask(asNobody: Bool, waiting milliseconds: Int, until condition: @escaping () -> Bool) throws -> String {
            let command = (asNobody ? nobody : []) + [Self.python, "-c", query, link, "\(milliseconds)"]
            let process = try SpawnedProcess(command, reapedByCaller: true)
            var ended: ChildExit?
            ThreadRunLoop.current.add(try ChildProcessSource(pid: process.pid) { ended = $0 }, to: .default)
            XCTAssertTrue(runCurrentLoop(safetyNet: .seconds(30)) { ended != nil && condition() })
            process.waitForOutput()
            XCTAssertEqual(ended, .exited(0), process.stderr)
            return process.stdout
        }
        XCTAssertEqual(try ask(asNobody: false, waiting: 20_000) { true }, "answered\n",
                       "this user is answered over the link (so the refusal below is the uid's)")
        XCTAssertEqual(try ask(asNobody: true, waiting: 1_000) { port.statistics.messagesDropped == 1 }, "no answer\n")
        XCTAssertEqual(port.statistics.messagesDropped, 1, "counted on the port")
        XCTAssertEqual(port.statistics.statisticsQueriesRefused, 1, "as a refused query")
        XCTAssertEqual(port.statistics.messagesReceived, 0)
    }

    func testAStatisticsQueryIsTheDocumentedHeaderAndItsAnswerTheDocumentedJSON() throws {
        let query = try WireDocument.hex(after: "the query's frame 0 in hex: `")
        XCTAssertEqual(WireCodec.statisticsQuery(messageID: 0, correlationID: 0x5157), query)
        let answerStart = try WireDocument.hex(after: "its answer's header and table in hex (the JSON, here 152 bytes, follows inline): `")

        let document = try WireDocument.text()
        let start = try XCTUnwrap(document.range(of: "integers only), `format` first:\n  `")?.upperBound)
        let json = String(document[start...].prefix { $0 != "`" })
        XCTAssertEqual(json.utf8.count, 152)
        let report = try XCTUnwrap(PortStatisticsReport(json: Array(json.utf8)))
        XCTAssertEqual(report.json, json, "the documented JSON is what the library writes, key for key")
        XCTAssertEqual(report.rightsOutstanding, 2)
        XCTAssertEqual(report.messagesReceived, 5)

        let answer = WireCodec.encode(WireMessage(kind: .reply, messageID: 0, correlationID: 0x5157,
                                                  components: [.data(Array(json.utf8))]))
        XCTAssertEqual(answer.count, 1)
        XCTAssertEqual(Array(answer[0].prefix(answerStart.count)), answerStart)
        XCTAssertEqual(Array(answer[0].dropFirst(answerStart.count)), Array(json.utf8))
    }

    func testAStatisticsReportIgnoresKeysItDoesNotKnowAndRefusesOneWithoutAKeyOfFormatOne() {
        let full = #"{"format":2,"rightsOutstanding":4,"requestsCancelled":1,"messagesReceived":9,"messagesDropped":2,"# +
            #""repliesFailed":0,"handlerErrors":3,"clientsRefused":0,"newCounter":7,"note":"a, b}","ratio":0.5,"up":true}"#
        let report = PortStatisticsReport(json: Array(full.utf8))
        XCTAssertEqual(report?.format, 2)
        XCTAssertEqual(report?.rightsOutstanding, 4)
        XCTAssertEqual(report?.handlerErrors, 3)
        XCTAssertNil(PortStatisticsReport(json: Array(#"{"format":1,"rightsOutstanding":4}"#.utf8)))
        XCTAssertNil(PortStatisticsReport(json: Array("not json".utf8)))
        XCTAssertNil(PortStatisticsReport(json: Array(#"{"format":1,"nested":{"a":1}}"#.utf8)))
    }

    /// The Python listing of `docs/wire-format.md`'s "Statistics queries", run against a
    /// named port of this process with the document's address replaced by the port's.
    func testThePyZMQListingOfTheWireFormatGetsAPortsStatistics() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python),
              (try? runCapturing([Self.python, "-c", "import zmq"]))?.exitStatus == 0 else {
            return XCTFail("\(Self.python) cannot import zmq: run `sh scripts/install-dependencies.sh` (Debian's python3-zmq)")
        }
        let document = try WireDocument.text()
        let start = try XCTUnwrap(document.range(of: "### Statistics queries\n")?.upperBound)
        let end = try XCTUnwrap(document[start...].range(of: "\n### ")?.lowerBound)
        let blocks = document[start..<end].components(separatedBy: "```python\n").dropFirst()
            .map { $0.components(separatedBy: "```").first ?? "" }
        XCTAssertEqual(blocks.count, 1)
        let documented = "ipc:///run/user/1000/runloopkit/server.sock"
        let listing = try XCTUnwrap(blocks.first)
        XCTAssertTrue(listing.contains(documented))

        let name = "stats-py-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        var seen: [Int32] = []
        let port = try LocalPort(name: name) { message in
            seen.append(message.id)
            return nil
        }
        ThreadRunLoop.current.add(port, to: .default)
        defer { port.invalidate() }
        try RemotePort(named: name).send(LoopMessage(id: 1))
        XCTAssertTrue(runCurrentLoop { seen == [1] })
        let address = "ipc://\(try RuntimeDirectory.path())/\(name).sock"

        let script = listing.replacingOccurrences(of: documented, with: address)
        let process = try SpawnedProcess([Self.python, "-c", script], reapedByCaller: true)
        var ended: ChildExit?
        ThreadRunLoop.current.add(try ChildProcessSource(pid: process.pid) { ended = $0 }, to: .default)
        XCTAssertTrue(runCurrentLoop(safetyNet: .seconds(30)) { ended != nil }, "the listing ends")
        process.waitForOutput()
        XCTAssertEqual(ended, .exited(0), "stdout: \(process.stdout); stderr: \(process.stderr)")
        let lines = process.stdout.split(separator: "\n")
        XCTAssertEqual(lines.first, "0 rights outstanding")
        let json = try XCTUnwrap(lines.last.map { Array($0.utf8) })
        let report = try XCTUnwrap(PortStatisticsReport(json: json), process.stdout)
        XCTAssertEqual(report, PortStatisticsReport(port.statistics))
        XCTAssertEqual(report.messagesReceived, 1)
        XCTAssertEqual(seen, [1], "the handler never saw the listing's query")
    }
}
