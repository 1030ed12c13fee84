import ArgumentParser

/// The root command: its subcommands, and the tool's exit codes.
struct RunLoopKitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "runloopkit",
        abstract: "Look at and talk to the named ports of programs built on RunLoopKit.",
        discussion: """
            Names live in the per-user runtime directory ($RUNLOOPKIT_RUNTIME_DIR, else \
            $XDG_RUNTIME_DIR/runloopkit, else /tmp/runloopkit-<uid>). Every command takes --json.

            Exit codes: 0 ok, 1 usage (bad arguments), 2 unknown port name, 3 the name's owner \
            is dead, 4 timeout (not taken, or no reply), 5 any other error.
            """,
        version: ToolVersion.line,
        subcommands: [PortsCommand.self, StatsCommand.self, SendCommand.self, RequestCommand.self, PingCommand.self,
                      KeygenCommand.self]
    )

    /// Parses `arguments` and runs the command; returns the exit code. Argument errors
    /// exit 1 (not ArgumentParser's 64) and a command's failure is one line on stderr.
    static func runAsTool(_ arguments: [String]) -> Int32 {
        do {
            var command = try parseAsRoot(arguments)
            try command.run()
            return ToolExit.ok.rawValue
        } catch let failure as ToolFailure {
            ToolOutput.printError("runloopkit: " + failure.message)
            return failure.exit.rawValue
        } catch {
            let message = fullMessage(for: error)
            if exitCode(for: error) == .success {
                if !message.isEmpty { print(message) } // --help
                return ToolExit.ok.rawValue
            }
            ToolOutput.printError(message)
            return ToolExit.usage.rawValue
        }
    }
}
