import ArgumentParser

/// A subcommand: its work, run on a thread of its own (see `ToolThread`), with its
/// failures reported the same way by every command.
protocol ToolCommand: ParsableCommand, Sendable {
    var output: OutputOptions { get }
    /// Does the command's work and prints its result; throws a failure to report.
    func execute() throws(ToolFailure)
}

extension ToolCommand {
    func run() throws {
        do throws(ToolFailure) {
            let command = self
            try ToolThread.run { () throws(ToolFailure) in try command.execute() }
        } catch {
            if output.json && !error.printedResult { ToolOutput.printJSON(ToolOutput.ErrorReport(error)) }
            throw error
        }
    }
}
