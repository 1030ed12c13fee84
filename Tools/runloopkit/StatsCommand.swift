import ArgumentParser
import RunLoopKit

/// `runloopkit stats NAME`: a port's statistics, asked of its process (wire kind 6).
struct StatsCommand: ToolCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Print a port's statistics: its rights outstanding, drops and other counters.",
        discussion: """
            The port's library answers the query itself; its handler never sees it. Only a \
            port of your own user answers, over ipc (a named port): a port over tcp, of another \
            user, or of RunLoopKit 0.1 drops the query, and the command times out (exit 4).
            """
    )

    @Argument(help: "The port's name, or an ipc:// or tcp:// address.")
    var name: String

    @OptionGroup var timeout: TimeoutOption
    @OptionGroup var output: OutputOptions

    struct Report: Encodable {
        let target: String
        let address: String
        let statistics: PortStatisticsReport
    }

    func execute() throws(ToolFailure) {
        let target = try PortTarget.resolve(name)
        let statistics = try Self.query(target, timeout: timeout)
        if output.json {
            return ToolOutput.printJSON(Report(target: target.label, address: target.remote.address.rawValue,
                                               statistics: statistics))
        }
        print("port '\(target.label)' (\(target.remote.address.rawValue))")
        for (label, value) in Self.rows(statistics) {
            print(label + String(repeating: " ", count: 20 - label.count) + "\(value)")
        }
    }

    /// The figures, in the order they print.
    static func rows(_ statistics: PortStatisticsReport) -> [(String, Int)] {
        [("rights outstanding", statistics.rightsOutstanding), ("requests cancelled", statistics.requestsCancelled),
         ("messages received", statistics.messagesReceived), ("messages dropped", statistics.messagesDropped),
         ("replies failed", statistics.repliesFailed), ("handler errors", statistics.handlerErrors),
         ("clients refused", statistics.clientsRefused)]
    }

    /// Asks `target` for its statistics; a timeout says the port does not answer queries.
    static func query(_ target: PortTarget, timeout: TimeoutOption) throws(ToolFailure) -> PortStatisticsReport {
        do throws(PortError) {
            return try target.remote.statistics(timeout: timeout.duration)
        } catch .receiveTimedOut {
            throw ToolFailure(.timeout, "timed out: the port '\(target.label)' does not answer statistics queries "
                + "within \(ToolFormat.seconds(timeout.timeout)) (RunLoopKit 0.1, over tcp, another user's, "
                + "or its loop is not running)")
        } catch {
            throw ToolFailure.from(error, target: target.label, timeout: timeout.timeout)
        }
    }
}
