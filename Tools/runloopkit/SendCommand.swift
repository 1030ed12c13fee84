import ArgumentParser
import RunLoopKit

/// `runloopkit send NAME --id N [--data TEXT | --file PATH]`: one message, no reply.
struct SendCommand: ToolCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send a message to a named port (or an ipc:// or tcp:// address).",
        discussion: "Returns once the port took the message; its handler's return value is not asked for."
    )

    @Argument(help: "The port's name, or an ipc:// or tcp:// address.")
    var name: String

    @OptionGroup var message: MessageOptions
    @OptionGroup var timeout: TimeoutOption
    @OptionGroup var output: OutputOptions

    struct Report: Encodable {
        let target: String
        let address: String
        let id: Int32
        let bytes: Int
    }

    func execute() throws(ToolFailure) {
        let sent = try message.message() // bad arguments first
        let target = try PortTarget.resolve(name)
        do throws(PortError) {
            // The tool exits at once: its exit waits for the message to be written out
            // (RemotePort.exitFlushLimit), as any program's does.
            try target.remote.send(sent, before: .after(timeout.duration))
        } catch {
            throw ToolFailure.from(error, target: target.label, timeout: timeout.timeout)
        }
        let bytes = sent.data.reduce(0) { $0 + $1.count }
        if output.json {
            ToolOutput.printJSON(Report(target: target.label, address: target.remote.address.rawValue, id: sent.id, bytes: bytes))
        } else {
            print("sent message \(sent.id) (\(bytes) bytes) to '\(target.label)'")
        }
    }
}
