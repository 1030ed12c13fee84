import Foundation
import XCTest

/// `docs/wire-format.md`, as the tests that check it against a port read it.
enum WireDocument {
    static let url = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent() // Support
        .deletingLastPathComponent() // RunLoopKitTests
        .deletingLastPathComponent() // Tests
        .deletingLastPathComponent() // the package
        .appendingPathComponent("docs/wire-format.md")

    /// The whole document.
    static func text() throws -> String { try String(contentsOf: url, encoding: .utf8) }

    /// The bytes the document shows in hex (`0a 1b …`) between `marker` and the next backtick.
    static func hex(after marker: String) throws -> [UInt8] {
        let document = try text()
        let start = try XCTUnwrap(document.range(of: marker)?.upperBound, "the document shows \(marker)")
        return try document[start...].prefix { $0 != "`" }.split(separator: " ").map {
            try XCTUnwrap(UInt8($0, radix: 16), "not a hex byte after \(marker): \($0)")
        }
    }
}
