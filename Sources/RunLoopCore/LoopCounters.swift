/// What a run loop has done since it was created: a value read from `LoopSnapshot`.
///
/// The loop keeps these as plain integers, bumped on its own thread (one add each), so
/// they cost nothing worth measuring and are only read on that thread, by `snapshot()`.
public struct LoopCounters: Sendable, Hashable {
    /// Passes through steps 2 to 9 of the run loop's sequence, over all runs.
    public var passes: Int
    /// Times a pass waited in the poll set (steps 6 to 8), including waits a pending
    /// `wakeUp()` ended at once. A pass that only looks at its ports (a source was just
    /// handled, or no time is left) does not count.
    public var wakeUps: Int
    /// Messages the loop's ports took in and decoded: each counted as a handled source.
    /// A message then dropped for want of a handler counts here and under `.noHandler`.
    public var messagesHandled: Int
    /// Messages dropped by the loop's ports, by reason; every reason is present (often 0).
    public var messagesDropped: [MessageDropReason: Int]

    public init(passes: Int = 0, wakeUps: Int = 0, messagesHandled: Int = 0,
                messagesDropped: [MessageDropReason: Int] = [:]) {
        self.passes = passes
        self.wakeUps = wakeUps
        self.messagesHandled = messagesHandled
        var complete = Dictionary(uniqueKeysWithValues: MessageDropReason.allCases.map { ($0, 0) })
        complete.merge(messagesDropped) { $1 }
        self.messagesDropped = complete
    }

    /// Messages dropped for any reason.
    public var totalMessagesDropped: Int { messagesDropped.values.reduce(0, +) }
}
