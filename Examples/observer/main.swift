// Listing 3-1 of the guide: an observer logging every activity of the run loop while a
// 0.1 s repeating timer fires, the loop being run 10 times with a short limit.
import ArgumentParser
import RunLoopKit

struct ObserverExample: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "observer",
                                                    abstract: "Log every run-loop activity while a timer fires.")

    @Option(help: "Seconds each of the 10 runs may last.")
    var limit: Double = 0.25

    @Flag(help: "Print only the summary.")
    var quiet = false

    func run() throws {
        let loop = ThreadRunLoop.current
        var counts: [String: Int] = [:]
        let observer = LoopObserver(activities: .all) { _, activity in
            counts["\(activity)", default: 0] += 1
            if !quiet { print("observer: \(activity)") }
        }
        loop.add(observer, to: .default)

        var fires = 0
        let timer = LoopTimer(after: .milliseconds(100), repeating: .milliseconds(100)) { _ in
            fires += 1
            if !quiet { print("timer fired (\(fires))") }
        }
        loop.add(timer, to: .default)

        for _ in 0..<10 { // run the run loop 10 times to let the timer fire
            loop.run(until: .after(.milliseconds(Int64(limit * 1000))))
        }
        timer.invalidate()
        observer.invalidate()

        let expectedFires = Int(10 * limit / 0.1)
        print("runs: 10, entries: \(counts["entry", default: 0]), exits: \(counts["exit", default: 0]), "
            + "sleeps: \(counts["beforeWaiting", default: 0]), timer fires: \(fires) (about \(expectedFires) expected)")
        guard counts["entry"] == 10, counts["exit"] == 10,
              counts["beforeTimers", default: 0] >= fires, fires >= expectedFires / 2, fires <= expectedFires + 1
        else { throw ExitCode.failure }
    }
}

ObserverExample.main()
