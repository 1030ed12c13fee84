/// Every case, in the order of the table.
struct BenchCase: Sendable {
    let name: String
    /// What it measures, for `--list` and the progress lines.
    let measures: String
    let run: @Sendable (BenchConfig) -> CaseOutcome
}

enum Catalog {
    static let all: [BenchCase] = [
        BenchCase(name: PortPingPongCase.name,
                  measures: "64-byte round trip between two run-loop threads over ports, µs",
                  run: PortPingPongCase.run),
        BenchCase(name: PortThroughputCase.name,
                  measures: "one-way 64-byte messages per second into a run-loop port",
                  run: PortThroughputCase.run),
        BenchCase(name: PortThroughputSizesCase.name,
                  measures: "the same stream at 16, 256 and 1,024 bytes, beside raw libzmq at each",
                  run: PortThroughputSizesCase.run),
        BenchCase(name: PerformRoundTripCase.name,
                  measures: "perform a closure on another loop thread and get its answer, µs",
                  run: PerformRoundTripCase.run),
        BenchCase(name: RequestReplyCase.name,
                  measures: "request/reply on a named port between threads, µs",
                  run: RequestReplyCase.run),
        BenchCase(name: RequestReplyDeferredCase.name,
                  measures: "request/reply on a named port, answered from a worker pool's thread, µs",
                  run: RequestReplyDeferredCase.run),
        BenchCase(name: ManyClientsCase.name,
                  measures: "1,000 short-lived requester threads, one request each: µs, descriptors, idle CPU",
                  run: ManyClientsCase.run),
        BenchCase(name: ProcessPingPongCase.name,
                  measures: "64-byte round trip between two processes over named ipc ports, µs",
                  run: ProcessPingPongCase.run),
        BenchCase(name: ProcessThroughputCase.name,
                  measures: "one-way 16 B-16 MiB messages to another process, every byte written and read",
                  run: ProcessThroughputCase.run),
        BenchCase(name: PeerDeathCase.name,
                  measures: "SIGKILL of a named port's owner process → the watcher's PortLossSource handler, µs",
                  run: PeerDeathCase.run),
        BenchCase(name: NameAppearCase.name,
                  measures: "a name registered in another process → the watcher's PortNameWatch handler, µs",
                  run: NameAppearCase.run),
        BenchCase(name: TimerLatenessCase.name,
                  measures: "lateness of a 1 ms repeating timer, µs",
                  run: TimerLatenessCase.run),
        BenchCase(name: IdleCPUCase.name,
                  measures: "CPU time of a loop thread asleep for 2 s on a far timer, ms",
                  run: IdleCPUCase.run),
        BenchCase(name: PortsScalingCase.name,
                  measures: "per-message cost with 1,000 ports on the loop ÷ with 1",
                  run: PortsScalingCase.run),
        BenchCase(name: CheckInCase.name,
                  measures: "time until 1,000 worker threads have checked in, ms",
                  run: CheckInCase.run),
        BenchCase(name: ThreadCyclesCase.name,
                  measures: "worker create → performAndWait → stop cycles per second; RSS growth",
                  run: ThreadCyclesCase.run),
        BenchCase(name: TaskHopCase.name,
                  measures: "a task awaiting a method of an actor pinned to a worker's run loop, µs",
                  run: TaskHopCase.run),
    ]

    static var names: [String] { all.map(\.name) }
}
