import ArgumentParser
import RunLoopKit

/// `runloopkit request NAME --id N [...]`: a request, and its reply printed.
struct RequestCommand: ToolCommand {
    static let configuration = CommandConfiguration(
        commandName: "request",
        abstract: "Send a request to a named port and print its reply.",
        discussion: """
            The port's handler's return value is the reply (an empty one if it returns nil). \
            Text components print as they are, one per line; --json shows every component.
            """
    )

    @Argument(help: "The port's name, or an ipc:// or tcp:// address.")
    var name: String

    @OptionGroup var message: MessageOptions
    @OptionGroup var timeout: TimeoutOption
    @OptionGroup var output: OutputOptions

    struct Report: Encodable {
        let target: String
        let address: String
        let roundTripMicroseconds: Double
        let reply: MessageReport
    }

    func execute() throws(ToolFailure) {
        let request = try message.message() // bad arguments first
        let target = try PortTarget.resolve(name)
        let reply: LoopMessage
        let started = Deadline.now()
        do throws(PortError) {
            reply = try target.remote.sendRequest(request, sendTimeout: timeout.duration, receiveTimeout: timeout.duration)
        } catch {
            throw ToolFailure.from(error, target: target.label, timeout: timeout.timeout)
        }
        let roundTrip = ToolFormat.nanoseconds(Deadline.now() - started)
        let report = MessageReport(reply)
        if output.json {
            ToolOutput.printJSON(Report(target: target.label, address: target.remote.address.rawValue,
                                        roundTripMicroseconds: ToolFormat.microsecondsValue(roundTrip), reply: report))
        } else {
            for line in report.lines { print(line) }
        }
    }
}
