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

    @Option(name: .customLong("repeat"), help: ArgumentHelp(
        "Run the selected cases this many times; report the median and the spread (min–max) of every figure and ratio, a target met when every run meets it (a spread that crosses it misses it).",
        valueName: "N"))
    var repeats = 1

    @Flag(help: "List the cases and exit.")
    var list = false

    @Option(help: ArgumentHelp("Measure only this contender (repeatable), for profiling.", valueName: "name"))
    var only: [String] = []

    @Option(help: "paired: the two threads of a latency pair share CPU 0, a stream's sender and receiver get CPUs 0 and 1 (stable ratios); free: the scheduler places every thread.")
    var placement: Placement.Mode = .paired

    // The child process of port-pingpong-processes, port-throughput-processes, peer-death or
    // name-appear (this executable started again).
    @Option(help: .hidden) var child: String?
    @Option(help: .hidden) var childPort: String?
    @Option(help: .hidden) var parentPort: String?
    @Option(help: .hidden) var endpoint: String?
    @Option(help: .hidden) var cpu: Int?
    @Option(help: .hidden) var ringSocket: String?

    func validate() throws {
        guard repeats >= 1 else { throw ValidationError("--repeat needs a count of at least 1") }
        for name in cases where !Catalog.names.contains(name) {
            throw ValidationError("unknown case '\(name)'; the cases: \(Catalog.names.joined(separator: ", "))")
        }
        if let child, ![ProcessPingPongCase.childRole, ProcessThroughputCase.childRole, PeerDeathCase.childRole,
                          NameAppearCase.childRole].contains(child) {
            throw ValidationError("unknown child role '\(child)'")
        }
    }

    func run() throws {
        // A child pinned before any thread exists: all its threads inherit the CPU.
        if child != nil, let cpu { Placement.pinCurrentThread(to: cpu) }
        if child == NameAppearCase.childRole { NameAppearCase.serveAsChild() }
        if child == PeerDeathCase.childRole {
            guard let childPort else { throw ValidationError("--child \(PeerDeathCase.childRole) needs --child-port") }
            PeerDeathCase.serveAsChild(name: childPort)
        }
        if child == ProcessThroughputCase.childRole {
            guard let childPort, let endpoint, let ringSocket else {
                throw ValidationError("--child \(ProcessThroughputCase.childRole) needs --child-port, --endpoint and --ring-socket")
            }
            ProcessThroughputCase.serveAsChild(childPort: childPort, endpoint: endpoint, ringPath: ringSocket)
        }
        if child != nil {
            guard let childPort, let parentPort, let endpoint else {
                throw ValidationError("--child needs --child-port, --parent-port and --endpoint")
            }
            ProcessPingPongCase.serveAsChild(childPort: childPort, parentPort: parentPort, endpoint: endpoint)
        }
        if list {
            for benchCase in Catalog.all { print("\(benchCase.name.padding(toLength: 28, withPad: " ", startingAt: 0))\(benchCase.measures)") }
            return
        }
        Placement.mode = placement
        Self.useMemoryRuntimeDirectory()
        let selected = cases.isEmpty ? Catalog.all : Catalog.all.filter { cases.contains($0.name) }
        let config = BenchConfig(quick: quick, only: only)
        let started = Date()
        let run = BenchRun(config: config, date: started, processors: System.processorCount, runs: repeats)
        Progress.say("runloopkit-bench: \(quick ? "quick" : "full") run of \(selected.count) case(s)"
                     + (repeats > 1 ? ", \(repeats) times," : "") + " on "
                     + "\(run.processors) processor(s), \(Placement.caption), \(run.dateText)")
        var runs: [[CaseOutcome]] = []
        for repetition in 1...repeats {
            let prefix = repeats > 1 ? "run \(repetition)/\(repeats) " : ""
            var outcomes: [CaseOutcome] = []
            for (index, benchCase) in selected.enumerated() {
                Progress.say("\(prefix)[\(index + 1)/\(selected.count)] \(benchCase.name): \(benchCase.measures) …")
                let start = Clock.now()
                var outcome = benchCase.run(config)
                outcome.seconds = Clock.seconds(since: start)
                Progress.say("\(prefix)[\(index + 1)/\(selected.count)] \(benchCase.name) done in "
                             + "\(Format.seconds(outcome.seconds)): " + Progress.summary(of: outcome))
                outcomes.append(outcome)
            }
            runs.append(outcomes)
        }
        let outcomes = Repeats.combine(runs)
        let total = Date().timeIntervalSince(started)
        print(Table.text(outcomes, run: run, totalSeconds: total))
        if let json { try write(JSONReport.render(outcomes), to: json) }
        if let svg { try write(Chart.svg(outcomes, run: run), to: svg) }
        if let markdown { try write(Table.markdown(outcomes, run: run, totalSeconds: total), to: markdown) }
    }

    private func write(_ text: String, to path: String) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        Progress.say("wrote \(path)")
    }

    /// Named ports' files (a registration makes four) go on tmpfs, as they do where
    /// `XDG_RUNTIME_DIR` is set (systemd's `/run/user/<uid>`), unless the environment names
    /// a runtime directory: the fallback, `/tmp`, is a disk's on some systems (Debian 12),
    /// where a registration takes 5 to 10 times as long. The child processes inherit it.
    static func useMemoryRuntimeDirectory() {
        guard getenv("RUNLOOPKIT_RUNTIME_DIR") == nil, getenv("XDG_RUNTIME_DIR") == nil else { return }
        setenv("RUNLOOPKIT_RUNTIME_DIR", "/dev/shm/runloopkit-bench-\(getuid())", 1)
    }
}

/// Facts about the run, for the table's and the chart's captions.
struct BenchRun: Sendable {
    let config: BenchConfig
    let date: Date
    let processors: Int
    /// How many times the cases ran (`--repeat`).
    var runs = 1

    var dateText: String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm 'UTC'"
        return formatter.string(from: date)
    }

    var caption: String {
        (runs > 1 ? "\(runs) \(config.quick ? "quick" : "full") runs (medians; the chart shows the last)"
                  : "\(config.quick ? "quick" : "full") run")
            + ", \(processors) processor(s), \(Placement.caption), \(dateText)"
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
            let verdicts = metric.verdicts.map { $0.verdict == .met ? "met" : $0.verdict == nil ? "n/a" : "MISSED" }
            return "\(metric.metric) runloopkit \(Format.value(metric.runloopkit))"
                + (peers.isEmpty ? "" : " vs \(peers)")
                + (verdicts.isEmpty ? "" : " [\(verdicts.joined(separator: ", "))]")
        }.joined(separator: "; ")
    }
}
