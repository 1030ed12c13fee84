import Foundation
import XCTest

/// The path of an executable of this package built next to the test bundle.
///
/// `swift test` cannot depend on executables, so one may be missing after a bare
/// `swift build --build-tests`: the test is then skipped, except in CI (`CI=true`), where
/// a missing executable is a failure.
func builtExecutable(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
    var directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    if ProcessInfo.processInfo.environment["CI"] == "true" {
        XCTFail("\(name) is not built next to the tests", file: file, line: line)
    }
    throw XCTSkip("\(name) is not built: run `swift build` first")
}
