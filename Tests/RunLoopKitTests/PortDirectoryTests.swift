import Foundation
import Glibc
@testable import RunLoopKit
import RunLoopTestSupport
import RunLoopWire
import RunLoopZMQ
import XCTest

/// Named ports: the name server, uniqueness, stale names and the runtime directory.
final class PortDirectoryTests: XCTestCase {
    private func uniqueName(_ base: String) -> String { "\(base)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))" }

    func testANamedPortIsFoundByNameAndReceivesWhatIsSentThere() throws {
        let name = uniqueName("lookup")
        var received: [String] = []
        let port = try LocalPort(name: name) { message in received.append(message.text ?? ""); return nil }
        ThreadRunLoop.current.add(port, to: .default)
        XCTAssertEqual(port.name, name)
        XCTAssertTrue(port.remote.address.rawValue.hasPrefix("ipc://"), "other processes are given its ipc address")
        let found = try RemotePort(named: name)
        XCTAssertTrue(found.address.isInProcess, "within the process a name resolves over inproc")
        try found.send(LoopMessage(id: 1, text: "by name"))
        try port.remote.send(LoopMessage(id: 2, text: "by ipc address"))
        let limit = Deadline.after(.seconds(20))
        while received.count < 2 && Deadline.now() < limit {
            _ = ThreadRunLoop.current.run(mode: .default, until: limit, returnAfterSourceHandled: true)
        }
        XCTAssertEqual(received, ["by name", "by ipc address"])
        port.invalidate()
    }

    func testRegisteringANameALivePortHoldsFailsWithNameInUse() throws {
        let name = uniqueName("taken")
        let first = try LocalPort(name: name)
        XCTAssertThrowsError(try LocalPort(name: name)) { XCTAssertEqual($0 as? PortError, .nameInUse(name, holder: getpid())) }
        let otherThread = LockedValue<PortError?>(nil)
        TestThread {
            do { _ = try LocalPort(name: name) } catch { otherThread.withLock { $0 = error as? PortError } }
        }.join()
        XCTAssertEqual(otherThread.withLock { $0 }, .nameInUse(name, holder: getpid()))
        first.invalidate()
        let second = try LocalPort(name: name)
        XCTAssertEqual(second.name, name, "an invalidated port's name is free again")
        second.invalidate()
    }

    func testTheLockIsWhatMakesANameUniqueAcrossProcesses() throws {
        // Another process would take the same open-file-description lock; a second open of
        // the lock file conflicts exactly as that process's would.
        let name = uniqueName("cross-process")
        let port = try LocalPort(name: name)
        let directory = try RuntimeDirectory.path()
        XCTAssertThrowsError(try NameLock(name: name, directory: directory)) {
            XCTAssertEqual($0 as? PortError, .nameInUse(name, holder: getpid()))
        }
        XCTAssertEqual(try NameLock.liveOwner(name: name, directory: directory), getpid())
        port.invalidate()
        XCTAssertNil(try NameLock.liveOwner(name: name, directory: directory))
    }

    func testANameLeftBehindByADeadProcessCanBeRegisteredAgain() throws {
        let name = uniqueName("stale")
        let directory = try RuntimeDirectory.path()
        // What a killed owner leaves: a lock file nobody holds and a socket file.
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(directory)/\(name).lock", contents: Data("999999\n".utf8)))
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(directory)/\(name).sock", contents: Data()))
        XCTAssertThrowsError(try RemotePort(named: name)) { XCTAssertEqual($0 as? PortError, .nameNotFound(name)) }
        let port = try LocalPort(name: name)
        XCTAssertEqual(try NameLock.liveOwner(name: name, directory: directory), getpid())
        XCTAssertNoThrow(try RemotePort(named: name))
        port.invalidate()
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(directory)/\(name).sock"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(directory)/\(name).lock"))
    }

    func testLookingUpANameNobodyHoldsFailsWithNameNotFound() {
        let name = uniqueName("nobody")
        XCTAssertThrowsError(try RemotePort(named: name)) { XCTAssertEqual($0 as? PortError, .nameNotFound(name)) }
    }

    func testBadNamesAreRejectedWithTheReason() {
        for bad in ["", "../x", "a/b", ".hidden", "-flag", "spaces are bad", String(repeating: "n", count: 101), "nul\u{0}"] {
            XCTAssertThrowsError(try LocalPort(name: bad), "\(bad.debugDescription)") { error in
                guard case .invalidName(let name, let reason)? = error as? PortError else {
                    return XCTFail("\(error) for \(bad.debugDescription)")
                }
                XCTAssertEqual(name, bad)
                XCTAssertFalse(reason.isEmpty)
            }
        }
        XCTAssertThrowsError(try RemotePort(named: "../etc/passwd")) {
            guard case .invalidName? = $0 as? PortError else { return XCTFail("\($0)") }
        }
    }

    func testBadAddressesAreRejected() {
        for bad in ["", "http://x", "inproc://", "file:///etc/passwd", "tcp:/x"] {
            XCTAssertNil(PortAddress(rawValue: bad), bad)
            XCTAssertThrowsError(try PortAddress(validating: bad)) { XCTAssertEqual($0 as? PortError, .invalidAddress(bad)) }
        }
        XCTAssertNotNil(PortAddress(rawValue: "tcp://127.0.0.1:5555"))
    }

    func testTheRuntimeDirectoryIsPrivateToItsUserAndSocketsToo() throws {
        let directory = try RuntimeDirectory.path()
        var info = stat()
        XCTAssertEqual(lstat(directory, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
        XCTAssertEqual(info.st_uid, getuid())
        let name = uniqueName("perm")
        let port = try LocalPort(name: name)
        XCTAssertEqual(stat("\(directory)/\(name).sock", &info), 0)
        XCTAssertEqual(info.st_mode & 0o077, 0, "the socket file is closed to others")
        port.invalidate()
    }

    /// The command prefix that runs a program as `nobody`: `setpriv` as root, through
    /// passwordless `sudo` otherwise; nil when this process cannot act as another user.
    static let asNobody: [String]? = {
        let setpriv = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        guard FileManager.default.isExecutableFile(atPath: setpriv[0]) else { return nil }
        if getuid() == 0 { return setpriv }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/sudo") else { return nil }
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/sudo")
        probe.arguments = ["-n", "true"] // -n: fails at once where sudo would ask for a password
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return nil }
        probe.waitUntilExit()
        return probe.terminationStatus == 0 ? ["/usr/bin/sudo", "-n"] + setpriv : nil
    }()

    /// Runs as root, or as a user with passwordless sudo (the README says so); elsewhere it
    /// fails with the reason: a test that cannot act as another user proves nothing about
    /// what another user can do, and is never reported as passed or skipped.
    func testAnotherUserCanNeitherListTheRuntimeDirectoryNorConnectToItsSockets() throws {
        guard let nobody = Self.asNobody else {
            return XCTFail("acting as another user needs root or passwordless sudo, and /usr/bin/setpriv")
        }
        let name = uniqueName("private")
        let port = try LocalPort(name: name)
        defer { port.invalidate() }
        let directory = try RuntimeDirectory.path()
        let socketPath = "\(directory)/\(name).sock"
        let connect = "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])"
        func run(asNobody: Bool, _ arguments: [String]) throws -> Int32 {
            let process = Process()
            let command = asNobody ? nobody + arguments : arguments
            process.executableURL = URL(fileURLWithPath: command[0])
            process.arguments = Array(command.dropFirst())
            process.standardError = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            return process.terminationStatus
        }
        XCTAssertEqual(try run(asNobody: true, ["/bin/sh", "-c", "test \"$(id -u)\" = 65534"]), 0,
                       "the command runs as nobody (so a refusal below is the kernel's)")
        XCTAssertEqual(try run(asNobody: false, ["/usr/bin/python3", "-c", connect, socketPath]), 0,
                       "the owner can connect (so the check below means something)")
        XCTAssertNotEqual(try run(asNobody: true, ["/usr/bin/python3", "-c", connect, socketPath]), 0,
                          "another user cannot connect to the port's socket")
        XCTAssertNotEqual(try run(asNobody: true, ["/bin/ls", directory]), 0, "nor list the runtime directory")
    }

    func testAnOpenOrForeignRuntimeDirectoryIsRefused() throws {
        let open = NSTemporaryDirectory() + "rlk-open-\(UInt32.random(in: 0...UInt32.max))"
        XCTAssertEqual(mkdir(open, 0o755), 0)
        chmod(open, 0o755)
        defer { rmdir(open) }
        XCTAssertThrowsError(try RuntimeDirectory.prepare(open)) {
            guard case .runtimeDirectoryUnsafe(_, let reason)? = $0 as? PortError else { return XCTFail("\($0)") }
            XCTAssertTrue(reason.contains("mode"))
        }
        let link = open + "-link"
        XCTAssertEqual(symlink(try RuntimeDirectory.path(), link), 0)
        defer { unlink(link) }
        XCTAssertThrowsError(try RuntimeDirectory.prepare(link)) {
            guard case .runtimeDirectoryUnsafe? = $0 as? PortError else { return XCTFail("\($0)") }
        }
        let fresh = open + "-fresh"
        defer { rmdir(fresh) }
        XCTAssertEqual(try RuntimeDirectory.prepare(fresh), fresh)
        var info = stat()
        XCTAssertEqual(stat(fresh, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
    }

    func testAPortBoundToTCPReceivesFromATCPPeer() throws {
        var received: [String] = []
        let port = try LocalPort { message in received.append(message.text ?? ""); return nil }
        ThreadRunLoop.current.add(port, to: .default)
        let address = try port.bind(tcp: "tcp://127.0.0.1:*")
        XCTAssertTrue(address.rawValue.hasPrefix("tcp://127.0.0.1:"))
        XCTAssertEqual(port.remote.address, address)
        // A raw ZeroMQ peer, as on another machine: no in-process shortcut.
        let peer = try ZMQSocket(type: .dealer)
        try peer.connect(address.rawValue)
        XCTAssertTrue(try peer.send(WireCodec.encode(LoopMessage(id: 5, text: "over tcp").wire(kind: .message)), dontWait: false))
        let limit = Deadline.after(.seconds(20))
        while received.isEmpty && Deadline.now() < limit {
            _ = ThreadRunLoop.current.run(mode: .default, until: limit, returnAfterSourceHandled: true)
        }
        XCTAssertEqual(received, ["over tcp"])
        port.invalidate()
    }
}
