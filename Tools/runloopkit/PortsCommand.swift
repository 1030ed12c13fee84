import ArgumentParser
import RunLoopKit

/// `runloopkit ports`: the names of the runtime directory, their owners and liveness.
struct PortsCommand: ToolCommand {
    static let configuration = CommandConfiguration(
        commandName: "ports",
        abstract: "List the named ports of the runtime directory, with owner pid and liveness.",
        discussion: "A dead name's owner exited without giving it back; the next port to register it takes it over."
    )

    @OptionGroup var output: OutputOptions

    struct Entry: Encodable {
        let name: String
        let pid: Int32?
        let alive: Bool
        let address: String
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
        if output.json {
            let entries = names.map { Entry(name: $0.name, pid: $0.ownerPID, alive: $0.isAlive, address: $0.address.rawValue) }
            return ToolOutput.printJSON(Report(runtimeDirectory: directory, ports: entries))
        }
        print("runtime directory: \(directory)")
        guard !names.isEmpty else { return print("no named ports") }
        let width = max(4, names.map(\.name.count).max() ?? 0)
        let pids = names.map { $0.ownerPID.map(String.init) ?? "?" }
        let pidWidth = max(3, pids.map(\.count).max() ?? 0)
        print(pad("NAME", width) + "  " + pad("PID", pidWidth, left: true) + "  STATE")
        for (entry, pid) in zip(names, pids) {
            print(pad(entry.name, width) + "  " + pad(pid, pidWidth, left: true) + "  " + (entry.isAlive ? "live" : "dead"))
        }
    }

    private func pad(_ text: String, _ width: Int, left: Bool = false) -> String {
        let padding = String(repeating: " ", count: max(0, width - text.count))
        return left ? padding + text : text + padding
    }
}
