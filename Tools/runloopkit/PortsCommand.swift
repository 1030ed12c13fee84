import ArgumentParser
import RunLoopKit

/// `runloopkit ports`: the names of the runtime directory, their owners and liveness.
struct PortsCommand: ToolCommand {
    static let configuration = CommandConfiguration(
        commandName: "ports",
        abstract: "List the named ports of the runtime directory, with owner pid and liveness.",
        discussion: "A dead name's owner exited without giving it back; the next port to register it takes it over."
    )

    @Flag(help: "Ask each live port for its statistics (rights outstanding, messages received and dropped).")
    var stats = false

    @Option(help: ArgumentHelp("With --stats, seconds to wait for each port's answer.", valueName: "seconds"))
    var timeout: Double = 1

    @OptionGroup var output: OutputOptions

    struct Entry: Encodable {
        let name: String
        let pid: Int32?
        let alive: Bool
        let address: String
        /// With --stats: the port's answer; absent for a dead port or one that does not answer.
        var statistics: PortStatisticsReport?
    }

    func validate() throws {
        guard timeout > 0, timeout <= 86_400 else {
            throw ValidationError("--timeout must be a positive number of seconds, at most a day")
        }
    }

    /// A live port's statistics, or nil if it does not answer within the timeout (or fails).
    private func statistics(of entry: RegisteredPortName) -> PortStatisticsReport? {
        guard stats, entry.isAlive else { return nil }
        return try? RemotePort(entry.address).statistics(timeout: .nanoseconds(Int64(timeout * 1e9)))
    }

    struct Report: Encodable {
        let runtimeDirectory: String
        let ports: [Entry]
    }

    func execute() throws(ToolFailure) {
        let directory: String
        let names: [RegisteredPortName]
        do {
            directory = try PortRegistry.runtimeDirectory()
            names = try PortRegistry.registeredNames()
        } catch {
            throw ToolFailure(.failure, "cannot read the runtime directory: \(error)")
        }
        let figures = names.map(statistics(of:))
        if output.json {
            let entries = zip(names, figures).map { name, figures in
                Entry(name: name.name, pid: name.ownerPID, alive: name.isAlive, address: name.address.rawValue,
                      statistics: figures)
            }
            return ToolOutput.printJSON(Report(runtimeDirectory: directory, ports: entries))
        }
        print("runtime directory: \(directory)")
        guard !names.isEmpty else { return print("no named ports") }
        let width = max(4, names.map(\.name.count).max() ?? 0)
        let pids = names.map { $0.ownerPID.map(String.init) ?? "?" }
        let pidWidth = max(3, pids.map(\.count).max() ?? 0)
        let columns = ["RIGHTS", "RECEIVED", "DROPPED"]
        print(pad("NAME", width) + "  " + pad("PID", pidWidth, left: true) + "  STATE"
            + (stats ? columns.map { "  " + $0 }.joined() : ""))
        for ((entry, pid), figures) in zip(zip(names, pids), figures) {
            var line = pad(entry.name, width) + "  " + pad(pid, pidWidth, left: true) + "  " + (entry.isAlive ? "live" : "dead")
            if stats {
                let values = figures.map { [$0.rightsOutstanding, $0.messagesReceived, $0.messagesDropped].map(String.init) }
                    ?? ["-", "-", "-"]
                for (column, value) in zip(columns, values) { line += "  " + pad(value, column.count, left: true) }
            }
            print(line)
        }
    }

    private func pad(_ text: String, _ width: Int, left: Bool = false) -> String {
        let padding = String(repeating: " ", count: max(0, width - text.count))
        return left ? padding + text : text + padding
    }
}
