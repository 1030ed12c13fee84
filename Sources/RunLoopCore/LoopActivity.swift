/// The points of a run-loop pass that observers can be told of (`CFRunLoopActivity`).
public struct LoopActivity: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// The run loop has been entered (step 1).
    public static let entry = LoopActivity(rawValue: 1 << 0)
    /// Ready timers are about to fire (step 2).
    public static let beforeTimers = LoopActivity(rawValue: 1 << 1)
    /// Non-port input sources are about to fire (step 3).
    public static let beforeSources = LoopActivity(rawValue: 1 << 2)
    /// The thread is about to sleep (step 6).
    public static let beforeWaiting = LoopActivity(rawValue: 1 << 5)
    /// The thread has woken, before it handles what woke it (step 8).
    public static let afterWaiting = LoopActivity(rawValue: 1 << 6)
    /// The run loop has exited (step 10).
    public static let exit = LoopActivity(rawValue: 1 << 7)
    /// Every activity.
    public static let all: LoopActivity = [.entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .exit]

    public var description: String {
        let names: [(LoopActivity, String)] = [
            (.entry, "entry"), (.beforeTimers, "beforeTimers"), (.beforeSources, "beforeSources"),
            (.beforeWaiting, "beforeWaiting"), (.afterWaiting, "afterWaiting"), (.exit, "exit"),
        ]
        let present = names.filter { contains($0.0) }.map(\.1)
        return present.count == 1 ? present[0] : "[" + present.joined(separator: ", ") + "]"
    }
}
