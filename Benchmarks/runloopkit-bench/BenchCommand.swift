import ArgumentParser
import Foundation

/// `runloopkit-bench`: RunLoopKit beside raw libzmq, Foundation and the machine's floors,
/// case by case in one process and run (issue 6; docs/benchmarks.md).
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "runloopkit-bench",
        abstract: "Benchmark RunLoopKit beside raw libzmq, Foundation's RunLoop and the machine's floors.",
        discussion: """
            Build in release: swift build -c release --product runloopkit-bench. Progress goes to \
            standard error, one line per case; the table to standard output. Ratios are \
            RunLoopKit's figure ÷ the peer's, measured in the same run.
            """
    )

    @Flag(help: "Fewer rounds and samples: under 2 minutes on 2 cores (the full run: under 10).")
    var quick = false

    @Option(name: .customLong("case"), help: "Run only this case (repeatable). See --list.")
    var cases: [String] = []

    @Option(help: ArgumentHelp("Write the results as JSON to this file.", valueName: "file"))
    var json: String?

    @Option(help: ArgumentHelp("Write the latency chart (SVG) to this file.", valueName: "file"))
    var svg: String?

    @Option(help: ArgumentHelp("Write the table as Markdown to this file.", valueName: "file"))
    var markdown: String?

    @Option(help: "Run the selected cases this many times in one invocation, and report each target's median and spread (a target is met when its median is).")
    var `repeat` = 1

    @Flag(help: "List the cases and exit.")
    var list = false

    @Option(help: ArgumentHelp("Measure only this contender (repeatable), for profiling.", valueName: "name"))
    var only: [String] = []

    @Option(help: "paired: the two threads of a latency pair share CPU 0, a stream's sender and receiver get CPUs 0 and 1 (stable ratios); free: the scheduler places every thread.")
    var placement: Placement.Mode = .paired

    // The child process of port-pingpong-processes (this executable started again).
    @Option(help: .hidden) var child: String?
    @Option(help: .hidden) var childPort: String?
    @Option(help: .hidden) var parentPort: String?
    @Option(help: .hidden) var endpoint: String?
    @Option(help: .hidden) var cpu: Int?

    func validate() throws {
        for name in cases where !Catalog.names.contains(name) {
            throw ValidationError("unknown case '\(name)'; the cases: \(Catalog.names.joined(separator: ", "))")
        }
        if let child, child != ProcessPingPongCase.childRole {
            throw ValidationError("unknown child role '\(child)'")
        }
    }

    func run() throws {
        if child != nil {
            guard let childPort, let parentPort, let endpoint else {
                throw ValidationError("--child needs --child-port, --parent-port and --endpoint")
            }
            if let cpu { Placement.pinCurrentThread(to: cpu) } // before any thread exists: all inherit it
            ProcessPingPongCase.serveAsChild(childPort: childPort, parentPort: parentPort, endpoint: endpoint)
        }
        if list {
            for benchCase in Catalog.all { print("\(benchCase.name.padding(toLength: 26, withPad: " ", startingAt: 0))\(benchCase.measures)") }
            return
        }
        Placement.mode = placement
        let selected = cases.isEmpty ? Catalog.all : Catalog.all.filter { cases.contains($0.name) }
        let config = BenchConfig(quick: quick, only: only)
        let started = Date()
        let run = BenchRun(config: config, date: started, processors: System.processorCount)
        Progress.say("runloopkit-bench: \(quick ? "quick" : "full") run of \(selected.count) case(s) on "
                     + "\(run.processors) processor(s), \(Placement.caption), \(run.dateText)")
        var runs: [[CaseOutcome]] = []
        for repetition in 1...max(1, self.repeat) {
            var outcomes: [CaseOutcome] = []
            for (index, benchCase) in selected.enumerated() {
                let label = self.repeat > 1 ? "run \(repetition)/\(self.repeat) " : ""
                Progress.say("\(label)[\(index + 1)/\(selected.count)] \(benchCase.name): \(benchCase.measures) …")
                let start = Clock.now()
                var outcome = benchCase.run(config)
                outcome.seconds = Clock.seconds(since: start)
                Progress.say("\(label)[\(index + 1)/\(selected.count)] \(benchCase.name) done in \(Format.seconds(outcome.seconds)): "
                             + Progress.summary(of: outcome))
                outcomes.append(outcome)
            }
            runs.append(outcomes)
        }
        let outcomes = runs.last!
        let total = Date().timeIntervalSince(started)
        print(Table.text(outcomes, run: run, totalSeconds: total))
        if runs.count > 1 { print(Repeats.text(runs)) }
        if let json { try write(JSONReport.render(outcomes), to: json) }
        if let svg { try write(Chart.svg(outcomes, run: run), to: svg) }
        if let markdown { try write(Table.markdown(outcomes, run: run, totalSeconds: total), to: markdown) }
    }

    private func write(_ text: String, to path: String) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        Progress.say("wrote \(path)")
    }
}

/// Facts about the run, for the table's and the chart's captions.
struct BenchRun: Sendable {
    let config: BenchConfig
    let date: Date
    let processors: Int

    var dateText: String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm 'UTC'"
        return formatter.string(from: date)
    }

    var caption: String {
        "\(config.quick ? "quick" : "full") run, \(processors) processor(s), \(Placement.caption), \(dateText)"
    }
}

/// The progress lines, on standard error.
enum Progress {
    static func say(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// RunLoopKit's figure and its peers' for the case's first metric, with the verdicts.
    static func summary(of outcome: CaseOutcome) -> String {
        outcome.metrics.map { metric in
            let peers = metric.peers.map { "\($0.name) \(Format.value($0.value))" }.joined(separator: ", ")
            let verdicts = metric.verdicts.map { $0.met == true ? "met" : $0.met == false ? "MISSED" : "n/a" }
            return "\(metric.metric) runloopkit \(Format.value(metric.runloopkit))"
                + (peers.isEmpty ? "" : " vs \(peers)")
                + (verdicts.isEmpty ? "" : " [\(verdicts.joined(separator: ", "))]")
        }.joined(separator: "; ")
    }
}
