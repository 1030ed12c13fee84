import Foundation
import RunLoopTestSupport
import XCTest

/// `scripts/install-dependencies.sh` on each family of systems, run with stand-ins for
/// the package tools (scripts on `PATH` that record how they were called) and an
/// os-release file of the test's choosing (`RUNLOOPKIT_OS_RELEASE`).
final class InstallDependenciesScriptTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("install-deps-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("bin"), withIntermediateDirectories: true)
        // The commands the script itself needs, and nothing else of the system's; `id`
        // says uid 1000, so that the script goes through (a stand-in for) sudo, as root or not.
        for tool in ["cat", "grep"] {
            try FileManager.default.createSymbolicLink(atPath: directory.appendingPathComponent("bin/\(tool)").path,
                                                       withDestinationPath: "/usr/bin/\(tool)")
        }
        let id = directory.appendingPathComponent("bin/id").path
        try "#!/bin/sh\necho 1000\n".write(toFile: id, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: id)
    }

    override func tearDownWithError() throws {
        try FileManager.default.removeItem(at: directory)
        directory = nil // XCTest keeps the test case objects until exit
    }

    /// A stand-in for `tool` that records its arguments and exits with `status`.
    private func fakeTool(_ tool: String, status: Int32 = 0) throws {
        let path = directory.appendingPathComponent("bin/\(tool)").path
        let script = "#!/bin/sh\necho \"\(tool) $*\" >> '\(directory.path)/calls'\nexit \(status)\n"
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
    }

    /// Runs the script as a non-root user would see it (sudo is a stand-in too).
    private func runScript(osRelease: String) throws -> (status: Int32, calls: [String], stderr: String) {
        let release = directory.appendingPathComponent("os-release")
        try osRelease.write(to: release, atomically: true, encoding: .utf8)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/install-dependencies.sh")
        let run = try runCapturing(["/bin/sh", script.path],
                                   environment: ["PATH": directory.appendingPathComponent("bin").path,
                                                 "RUNLOOPKIT_OS_RELEASE": release.path],
                                   inheritEnvironment: false)
        let calls = (try? String(contentsOf: directory.appendingPathComponent("calls"), encoding: .utf8)) ?? ""
        return (run.exitStatus ?? -1, calls.split(separator: "\n").map(String.init), run.stderr)
    }

    func testOnFedoraTheMissingPackagesAreInstalledWithDnf() throws {
        try fakeTool("rpm", status: 1) // nothing installed
        try fakeTool("dnf")
        try fakeTool("yum")
        try fakeTool("sudo")
        let run = try runScript(osRelease: "NAME=\"Fedora Linux\"\nID=fedora\n")
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.calls.last, "sudo dnf install -y -q zeromq-devel python3 python3-zmq")
    }

    func testOnAmazonLinuxWithoutDnfTheyAreInstalledWithYum() throws {
        try fakeTool("rpm", status: 1)
        try fakeTool("yum")
        try fakeTool("sudo")
        let run = try runScript(osRelease: "NAME=\"Amazon Linux\"\nID=\"amzn\"\nID_LIKE=\"centos rhel fedora\"\n")
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.calls.last, "sudo yum install -y -q zeromq-devel python3 python3-zmq")
    }

    func testOnFedoraWithEverythingInstalledNothingIsInstalled() throws {
        try fakeTool("rpm", status: 0)
        try fakeTool("dnf")
        try fakeTool("sudo")
        let run = try runScript(osRelease: "ID=fedora\n")
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.calls, ["rpm -q zeromq-devel", "rpm -q python3", "rpm -q python3-zmq"])
    }

    func testAFailedDnfInstallExitsNonZeroAndPointsToEPEL() throws {
        try fakeTool("rpm", status: 1)
        try fakeTool("dnf", status: 1)
        try fakeTool("sudo", status: 1)
        let run = try runScript(osRelease: "ID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\n")
        XCTAssertEqual(run.status, 1)
        XCTAssertTrue(run.stderr.contains("EPEL"), run.stderr)
    }

    func testOnUbuntuTheMissingPackagesAreInstalledWithAptGet() throws {
        try fakeTool("dpkg-query", status: 1)
        try fakeTool("apt-get")
        try fakeTool("sudo")
        let run = try runScript(osRelease: "ID=ubuntu\nID_LIKE=debian\n")
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.calls.suffix(2), ["sudo apt-get update -qq", "sudo apt-get install -y -qq libzmq3-dev python3 python3-zmq"])
    }

    func testOnAnotherSystemItSaysWhatToInstallAndExitsWithTwo() throws {
        let run = try runScript(osRelease: "ID=arch\n")
        XCTAssertEqual(run.status, 2)
        XCTAssertTrue(run.stderr.contains("libzmq 4.3 or later"), run.stderr)
        XCTAssertTrue(run.stderr.contains("pyzmq"), run.stderr)
        XCTAssertTrue(run.calls.isEmpty, "\(run.calls)")
    }
}
