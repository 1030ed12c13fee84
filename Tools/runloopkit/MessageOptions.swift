import ArgumentParser
import Foundation
import RunLoopKit

/// The message `send` and `request` build: an id and at most one data component.
struct MessageOptions: ParsableArguments {
    @Option(help: "The message id (msgid), a 32-bit signed integer.")
    var id: Int32

    @Option(help: "Text sent as the message's one data component, in UTF-8.")
    var data: String?

    @Option(help: ArgumentHelp("A file whose bytes are the message's one data component.", valueName: "path"))
    var file: String?

    func validate() throws {
        guard data == nil || file == nil else {
            throw ValidationError("give --data or --file, not both")
        }
    }

    /// The message; reading `--file` may fail.
    func message() throws(ToolFailure) -> LoopMessage {
        if let data { return LoopMessage(id: id, text: data) }
        guard let file else { return LoopMessage(id: id) }
        guard let contents = FileManager.default.contents(atPath: file) else {
            throw ToolFailure(.usage, "cannot read the file '\(file)'")
        }
        return LoopMessage(id: id, components: [.data(Array(contents))])
    }
}
