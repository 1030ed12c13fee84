import Foundation
import XCTest

/// The promise tables of `docs/reliability.md` and `docs/security.md` name the test that
/// proves each promise; a promise is only as good as that test, so each test named there
/// must exist. `Suite.testName` names a test; `Suite` a whole suite; `…fragment` (the doc's
/// shorthand) a test of the last suite named before it whose name contains the fragment.
final class DocsClaimsTests: XCTestCase {
    private static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Every test suite of the package, by class name, with the test functions it declares.
    private static let suites: [String: Set<String>] = {
        var suites: [String: Set<String>] = [:]
        let tests = root.appendingPathComponent("Tests")
        let files = FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" } ?? []
        for file in files {
            guard let text = try? String(contentsOf: file, encoding: .utf8) else { continue }
            var suite: String?
            for line in text.split(separator: "\n") {
                if let range = line.range(of: #"class (\w+Tests)\b"#, options: .regularExpression) {
                    suite = String(line[range].dropFirst("class ".count))
                    suites[suite!, default: []] = suites[suite!, default: []]
                } else if let suite, let range = line.range(of: #"func (test\w+)\("#, options: .regularExpression) {
                    suites[suite, default: []].insert(String(line[range].dropFirst("func ".count).dropLast()))
                }
            }
        }
        return suites
    }()

    func testEveryTestThatTheReliabilityAndSecurityDocsNameExists() throws {
        var checked = 0
        for document in ["docs/reliability.md", "docs/security.md"] {
            let text = try String(contentsOf: Self.root.appendingPathComponent(document), encoding: .utf8)
            var lastSuite: String?
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                for token in line.split(separator: "`").enumerated().filter({ $0.offset % 2 == 1 }).map({ String($0.element) }) {
                    let place = "\(document):\(number + 1): `\(token)`"
                    let parts = token.split(separator: ".", maxSplits: 1).map(String.init)
                    if parts.count == 2, parts[0].hasSuffix("Tests"), parts[1].hasPrefix("test") {
                        XCTAssertTrue(Self.suites[parts[0]]?.contains(parts[1]) ?? false, "\(place): no such test")
                        lastSuite = parts[0]
                        checked += 1
                    } else if token.first?.isUppercase == true, token.hasSuffix("Tests"), token.allSatisfy(\.isLetter) {
                        XCTAssertNotNil(Self.suites[token], "\(place): no such suite")
                        lastSuite = token
                        checked += 1
                    } else if token.hasPrefix("…") {
                        let fragment = token.trimmingCharacters(in: CharacterSet(charactersIn: "…"))
                        guard let suite = lastSuite else { XCTFail("\(place): no suite named before it"); continue }
                        XCTAssertTrue(Self.suites[suite]?.contains { $0.contains(fragment) } ?? false,
                                      "\(place): no test of \(suite) has \(fragment) in its name")
                        checked += 1
                    }
                }
            }
        }
        XCTAssertGreaterThan(checked, 100, "the documents name their tests")
    }
}
