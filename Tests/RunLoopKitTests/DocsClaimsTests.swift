import Foundation
import XCTest

/// The documents name the tests that prove what they say (the promise tables of
/// `docs/reliability.md` and `docs/security.md`, the README, the other docs and DocC
/// articles); a promise is only as good as that test, so each test a document names must
/// exist. In backticks: `Suite.testName` names a test; `Suite` a whole suite, or a test
/// target (`RunLoopKitTests`); `Suite.swift` a test file and `Tests/…` a path under
/// `Tests/`; `…fragment` (the doc's shorthand) a test of the last suite named before it in
/// the document whose name contains the fragment, or, ending in `Tests`, the suites whose
/// names end with it. In a document that named no suite yet, `…fragment` abbreviates
/// something else (DocC's `…WriteCallBack`).
final class DocsClaimsTests: XCTestCase {
    private static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Every document: the README, `docs/` (and its folders) and the DocC catalogs' articles.
    private static let documents: [String] = {
        var documents = ["README.md"]
        for folder in ["docs", "Sources"] {
            let files = FileManager.default.enumerator(at: root.appendingPathComponent(folder), includingPropertiesForKeys: nil)?
                .compactMap { $0 as? URL } ?? []
            for file in files where file.pathExtension == "md" && (folder == "docs" || file.path.contains(".docc/")) {
                documents.append(String(file.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count + 1)))
            }
        }
        return documents.sorted()
    }()

    /// The test targets: the folders of `Tests/`.
    private static let testTargets: Set<String> = {
        let folders = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Tests").path)) ?? []
        return Set(folders)
    }()

    /// The names of the Swift files under `Tests/`.
    private static let testFiles: Set<String> = {
        let files = FileManager.default.enumerator(at: root.appendingPathComponent("Tests"), includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" } ?? []
        return Set(files.map(\.lastPathComponent))
    }()

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
                if let range = line.range(of: #"\b(class|extension) \w+Tests\b"#, options: .regularExpression) {
                    suite = String(line[range].split(separator: " ").last!)
                    suites[suite!, default: []] = suites[suite!, default: []]
                } else if let suite, let range = line.range(of: #"func (test\w+)\("#, options: .regularExpression) {
                    suites[suite, default: []].insert(String(line[range].dropFirst("func ".count).dropLast()))
                }
            }
        }
        return suites
    }()

    func testTheDocumentsAreTheREADMETheDocsAndTheDocCArticles() {
        XCTAssertTrue(Self.documents.contains("README.md"))
        XCTAssertTrue(Self.documents.contains("docs/reliability.md"))
        XCTAssertTrue(Self.documents.contains("docs/security.md"))
        XCTAssertTrue(Self.documents.contains("Sources/RunLoopKit/RunLoopKit.docc/RunLoopKit.md"), "\(Self.documents)")
    }

    func testEveryTestThatADocumentNamesExists() throws {
        var checked: [String: Int] = [:]
        for document in Self.documents {
            let text = try String(contentsOf: Self.root.appendingPathComponent(document), encoding: .utf8)
            var lastSuite: String?
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                for token in line.split(separator: "`").enumerated().filter({ $0.offset % 2 == 1 }).map({ String($0.element) }) {
                    let place = "\(document):\(number + 1): `\(token)`"
                    let parts = token.split(separator: ".", maxSplits: 1).map(String.init)
                    if token.hasPrefix("Tests/") {
                        XCTAssertTrue(FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(token).path),
                                      "\(place): no such path")
                    } else if parts.count == 2, parts[0].hasSuffix("Tests"), parts[1].hasPrefix("test") {
                        XCTAssertTrue(Self.suites[parts[0]]?.contains(parts[1]) ?? false, "\(place): no such test")
                        lastSuite = parts[0]
                    } else if parts.count == 2, parts[0].hasSuffix("Tests"), parts[1] == "swift" {
                        XCTAssertTrue(Self.testFiles.contains(token), "\(place): no such test file")
                    } else if token.first?.isUppercase == true, token.hasSuffix("Tests"), token.allSatisfy(\.isLetter) {
                        if Self.testTargets.contains(token) { checked[document, default: 0] += 1; continue }
                        XCTAssertNotNil(Self.suites[token], "\(place): no such suite or test target")
                        lastSuite = token
                    } else if token.hasPrefix("…"), token.dropFirst().allSatisfy(\.isLetter) {
                        let fragment = String(token.dropFirst())
                        if fragment.hasSuffix("Tests") {
                            XCTAssertTrue(Self.suites.keys.contains { $0.hasSuffix(fragment) }, "\(place): no suite ends with it")
                        } else if let suite = lastSuite {
                            XCTAssertTrue(Self.suites[suite]?.contains { $0.contains(fragment) } ?? false,
                                          "\(place): no test of \(suite) has \(fragment) in its name")
                        } else {
                            continue // not a test's name: no suite was named before it
                        }
                    } else {
                        continue
                    }
                    checked[document, default: 0] += 1
                }
            }
        }
        XCTAssertGreaterThan(checked.values.reduce(0, +), 100, "the documents name their tests")
        for document in ["README.md", "docs/reliability.md", "docs/security.md", "docs/architecture.md", "docs/wire-format.md"] {
            XCTAssertGreaterThan(checked[document] ?? 0, 0, "\(document) names tests, and they were read: \(checked)")
        }
    }
}
