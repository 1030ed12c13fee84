import ArgumentParser
import LatencyStatistics
import RunLoopKit

/// `runloopkit ping NAME [--count N]`: request/reply round trips and their percentiles.
struct PingCommand: ToolCommand {
    static let configuration = CommandConfiguration(
        commandName: "ping",
        abstract: "Measure request/reply round trips to a named port: percentiles in microseconds.",
        discussion: """
            Sends --count requests one after the other, each with --id and no data, and times each \
            until its reply. Any port with a handler replies (its handler sees the requests). \
            A request without reply within --timeout counts as timed out, and the tool exits 4.
            """
    )

    @Argument(help: "The port's name, or an ipc:// or tcp:// address.")
    var name: String

    @Option(name: .shortAndLong, help: "How many round trips to measure.")
    var count = 10

    @Option(help: "The id of each request.")
    var id: Int32 = 0

    @Option(help: "Round trips made first and not measured (the connection is set up then).")
    var warmup = 1

    @OptionGroup var timeout: TimeoutOption
    @OptionGroup var output: OutputOptions

    func validate() throws {
        guard count >= 1 else { throw ValidationError("--count must be at least 1") }
        guard warmup >= 0 else { throw ValidationError("--warmup must not be negative") }
    }

    struct Report: Encodable {
        let target: String
        let address: String
        let requests: Int
        let replies: Int
        let timeouts: Int
        let roundTripMicroseconds: RoundTripSummary?
    }

    func execute() throws(ToolFailure) {
        let target = try PortTarget.resolve(name)
        var roundTrips = LatencyHistogram()
        var timeouts = 0
        do throws(PortError) {
            for _ in 0..<warmup { _ = try roundTrip(to: target) }
            for _ in 0..<count {
                do throws(PortError) {
                    roundTrips.record(nanoseconds: try roundTrip(to: target))
                } catch .receiveTimedOut {
                    timeouts += 1 // no reply to this one: the next may still get one
                }
            }
        } catch {
            throw ToolFailure.from(error, target: target.label, timeout: timeout.timeout)
        }
        let summary = RoundTripSummary(roundTrips)
        if output.json {
            ToolOutput.printJSON(Report(target: target.label, address: target.remote.address.rawValue, requests: count,
                                        replies: count - timeouts, timeouts: timeouts, roundTripMicroseconds: summary))
        } else {
            print("ping '\(target.label)': \(count) requests, \(count - timeouts) replies, \(timeouts) timed out")
            if let summary { print("round trip (µs): " + summary.text) }
        }
        guard timeouts == 0 else {
            var failure = ToolFailure(.timeout, "timed out: \(timeouts) of \(count) requests to '\(target.label)' "
                + "got no reply within \(ToolFormat.seconds(timeout.timeout))")
            failure.printedResult = true
            throw failure
        }
    }

    /// One request and its reply; the time between, in nanoseconds.
    private func roundTrip(to target: PortTarget) throws(PortError) -> UInt64 {
        let started = Deadline.now()
        _ = try target.remote.sendRequest(LoopMessage(id: id), sendTimeout: timeout.duration,
                                          receiveTimeout: timeout.duration)
        return UInt64(ToolFormat.nanoseconds(Deadline.now() - started).rounded())
    }
}
