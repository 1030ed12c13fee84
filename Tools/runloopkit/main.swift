// The `runloopkit` command-line tool: named ports of the runtime directory, messages,
// requests and pings to them. See docs/cli.md; exit codes are in ToolExit.swift.
import Glibc

exit(RunLoopKitCommand.runAsTool(Array(CommandLine.arguments.dropFirst())))
