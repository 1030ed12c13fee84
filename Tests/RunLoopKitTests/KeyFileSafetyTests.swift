import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import XCTest

/// Key files are never half-written and never replaced by surprise (`docs/security.md`,
/// "Safe by default"): `PortKeyPair.write(to:)` replaces a file whole or not at all, and an
/// exclusive write (what `runloopkit keygen` does) never replaces a file, however recent.
final class KeyFileSafetyTests: XCTestCase {
    private static let scenarioVariable = "RUNLOOPKIT_KEY_FILE_SCENARIO"

    override func setUp() {
        super.setUp()
        guard let scenario = childScenario(KeyFileSafetyTests.scenarioVariable) else { return }
        endChild { KeyFileSafetyTests.runScenario(scenario) }
    }

    private func temporaryDirectory() throws -> String {
        var template = Array("/tmp/runloopkit-keyfiles-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXError(.EIO) }
        let path = String(cString: made)
        addTeardownBlock { _ = try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    private static func contents(_ path: String) -> String? {
        try? String(contentsOfFile: path, encoding: .utf8)
    }

    private static func mode(of path: String) -> String {
        var info = stat()
        guard stat(path, &info) == 0 else { return "none" }
        return String(info.st_mode & 0o777, radix: 8)
    }

    /// The names in `directory` (hidden ones included: a temporary file left behind shows).
    private static func names(in directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    /// The file is in place before the write starts, as one made between a check and the
    /// write would be: the exclusive create itself refuses it.
    func testAnExclusiveWriteRefusesAFileMadeJustBeforeAndLeavesItAsItWas() throws {
        let directory = try temporaryDirectory()
        let keys = try PortKeyPair.generate()
        for (name, write) in [("pair", { (path: String) throws(PortError) in try keys.write(to: path, exclusive: true) }),
                              ("public", { (path: String) throws(PortError) in try keys.writePublicKey(to: path, exclusive: true) })] {
            let path = "\(directory)/\(name)"
            XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("someone else's\n".utf8)))
            XCTAssertThrowsError(try write(path)) {
                guard case .system(let cause) = $0 as? PortError, cause.code == .fileExists else {
                    return XCTFail("\(name): \($0)")
                }
            }
            XCTAssertEqual(Self.contents(path), "someone else's\n", name)
        }
        XCTAssertEqual(Self.names(in: directory), ["pair", "public"], "no temporary file is left")

        // A new path: created, with its mode whatever the umask.
        let umaskBefore = umask(0o077)
        defer { umask(umaskBefore) }
        try keys.write(to: "\(directory)/new", exclusive: true)
        try keys.writePublicKey(to: "\(directory)/new.pub", exclusive: true)
        XCTAssertEqual(Self.mode(of: "\(directory)/new"), "600")
        XCTAssertEqual(Self.mode(of: "\(directory)/new.pub"), "644")
        XCTAssertEqual(try PortKeyPair(contentsOf: "\(directory)/new"), keys)
    }

    func testKeygenRefusesAnExistingPublicKeyFileAndLeavesNoKeyPairBehind() throws {
        let directory = try temporaryDirectory()
        let path = "\(directory)/server"
        XCTAssertTrue(FileManager.default.createFile(atPath: path + ".pub", contents: Data("kept\n".utf8)))
        let run = try runBuiltExecutable("runloopkit", ["keygen", path])
        XCTAssertEqual(run.status, 1, "\(run)")
        XCTAssertTrue(run.stderr.contains("\(path).pub exists"), run.stderr)
        XCTAssertEqual(Self.contents(path + ".pub"), "kept\n")
        XCTAssertEqual(Self.names(in: directory), ["server.pub"], "the pair made first is removed, and no temporary file is left")
    }

    /// The write fails part way (`RLIMIT_FSIZE` lets no file grow past 64 bytes; a key pair
    /// is about 230): the key that was there is intact, its mode too, and nothing is left.
    func testAKeyFileIsIntactWhenRewritingItFailsPartWay() throws {
        let directory = try temporaryDirectory()
        try expectPassingChild(self, test: #function, variable: Self.scenarioVariable, scenario: "rewrite-fails \(directory)")
    }

    // MARK: - The scenarios (in the child)

    private static func runScenario(_ scenario: String) -> Bool {
        let parts = scenario.split(separator: " ").map(String.init)
        guard parts.count == 2, parts[0] == "rewrite-fails" else { return childReport(false, "unknown scenario \(scenario)") }
        let directory = parts[1]
        let path = "\(directory)/server.key"
        do {
            let old = try PortKeyPair.generate()
            try old.write(to: path)
            let before = contents(path)
            signal(SIGXFSZ, SIG_IGN) // the write fails with EFBIG instead of the signal ending the process
            var limit = rlimit()
            getrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &limit)
            limit.rlim_cur = 64
            guard setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &limit) == 0 else {
                return childReport(false, "setrlimit: errno \(errno)")
            }
            var passed = true
            do {
                try PortKeyPair.generate().write(to: path)
                passed = childReport(false, "the write past RLIMIT_FSIZE succeeded") && passed
            } catch {
                passed = childReport("\(error)".contains("File too large"), "the write failed: \(error)") && passed
            }
            passed = childReport(contents(path) == before, "the old file is as it was") && passed
            passed = childReport((try? PortKeyPair(contentsOf: path)) == old, "the old key pair still reads") && passed
            passed = childReport(mode(of: path) == "600", "its mode is 600: \(mode(of: path))") && passed
            passed = childReport(names(in: directory) == ["server.key"], "nothing else is left: \(names(in: directory))") && passed
            return passed
        } catch {
            return childReport(false, "\(error)")
        }
    }
}
