import Foundation

/// Printing results and errors.
enum ToolOutput {
    /// One line of JSON (keys sorted), on stdout.
    static func printJSON(_ value: some Encodable) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            let data = try encoder.encode(value)
            print(String(decoding: data, as: UTF8.self))
        } catch {
            preconditionFailure("cannot encode the tool's own output: \(error)")
        }
    }

    /// A line on stderr.
    static func printError(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// The error object `--json` prints when a command fails before it has a result.
    struct ErrorReport: Encodable {
        struct Details: Encodable {
            let kind: String
            let message: String
            let exitCode: Int32
        }
        let error: Details

        init(_ failure: ToolFailure) {
            error = Details(kind: failure.exit.kind, message: failure.message, exitCode: failure.exit.rawValue)
        }
    }
}
