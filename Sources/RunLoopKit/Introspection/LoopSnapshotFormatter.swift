import RunLoopCore
import RunLoopSystem

/// The text of a `LoopSnapshot`, in the spirit of `CFRunLoop`'s description: one line per
/// item, under its mode, each item with its identity, so that every item added shows.
struct LoopSnapshotFormatter {
    private let snapshot: LoopSnapshot
    private var lines: [String] = []

    init(_ snapshot: LoopSnapshot) { self.snapshot = snapshot }

    var text: String {
        var formatter = self
        formatter.build()
        return formatter.lines.joined(separator: "\n")
    }

    private mutating func build() {
        let indent = "    "
        lines.append("ThreadRunLoop(\(snapshot.isMainLoop ? "main" : "thread")) {")
        let running = snapshot.runningModes.map(\.rawValue)
        lines.append(indent + "running: " + (running.isEmpty ? "no"
            : running.count == 1 ? running[0] : running.joined(separator: " > ") + " (nested, outermost first)"))
        lines.append(indent + "common modes: [" + snapshot.commonModes.map(\.rawValue).joined(separator: ", ") + "]")
        lines.append(indent + "pending perform requests: \(snapshot.pendingPerformRequests)")
        lines.append(indent + "counters: " + Self.describe(snapshot.counters))
        add(snapshot.commonModeItems, title: "items added to common modes")
        for mode in snapshot.modes {
            add(mode, title: "mode \(mode.mode.rawValue)" + (mode.isCommon ? " (common)" : ""))
        }
        lines.append("}")
    }

    private mutating func add(_ contents: LoopSnapshot.ModeContents, title: String) {
        let indent = "    "
        guard !contents.isEmpty else {
            lines.append(indent + title + ": empty")
            return
        }
        lines.append(indent + title + ":")
        let item = indent + indent
        for source in contents.sources {
            lines.append(item + "source \(Self.identity(source.id)) order \(source.order)"
                + (source.isSignalled ? ", signalled" : "") + Self.invalid(source.isValid))
        }
        for port in contents.ports {
            lines.append(item + "port \(Self.identity(port.id)) \(port.address)"
                + (port.name.map { " name \"\($0)\"" } ?? "")
                + (port.isQueuedAsReady ? ", queued as ready" : "")
                + ", received \(port.messagesReceived), dropped \(port.messagesDropped)"
                + (port.repliesFailed > 0 ? ", replies failed \(port.repliesFailed)" : "")
                + (port.rightsOutstanding > 0 ? ", rights outstanding \(port.rightsOutstanding)" : "")
                + (port.requestsCancelled > 0 ? ", requests cancelled \(port.requestsCancelled)" : ""))
        }
        for timer in contents.timers {
            let due = timer.fireDate == .distantFuture ? "never fires"
                : timer.fireDelay < .zero ? "overdue by \(Self.format(.zero - timer.fireDelay))"
                : "fires in \(Self.format(timer.fireDelay))"
            lines.append(item + "timer \(Self.identity(timer.id)) \(due)"
                + (timer.interval.map { ", repeats every \(Self.format($0))" } ?? ", one-shot")
                + ", tolerance \(Self.format(timer.tolerance))" + Self.invalid(timer.isValid))
        }
        for observer in contents.observers {
            lines.append(item + "observer \(Self.identity(observer.id)) \(observer.activities) order \(observer.order)"
                + (observer.repeats ? ", repeats" : ", one-shot") + Self.invalid(observer.isValid))
        }
    }

    static func describe(_ counters: LoopCounters) -> String {
        let drops = MessageDropReason.allCases.compactMap { reason in
            counters.messagesDropped[reason].flatMap { $0 > 0 ? "\(reason) \($0)" : nil }
        }
        return "\(counters.passes) passes, \(counters.wakeUps) wake-ups, \(counters.messagesHandled) messages handled, "
            + "\(counters.totalMessagesDropped) dropped" + (drops.isEmpty ? "" : " (" + drops.joined(separator: ", ") + ")")
    }

    /// An object's address, as `CFRunLoop`'s description shows it.
    static func identity(_ id: ObjectIdentifier) -> String {
        "0x" + String(UInt(bitPattern: id), radix: 16)
    }

    private static func invalid(_ isValid: Bool) -> String { isValid ? "" : " (invalidated)" }

    /// A duration with three decimals in s, ms or µs: "0.300 s", "5.000 ms".
    static func format(_ duration: Duration) -> String {
        let nanoseconds = duration.totalNanoseconds
        let sign = nanoseconds < 0 ? "-" : ""
        let magnitude = nanoseconds.magnitude
        if magnitude >= 1_000_000_000 { return sign + decimal(magnitude, unit: 1_000_000_000) + " s" }
        if magnitude >= 1_000_000 { return sign + decimal(magnitude, unit: 1_000_000) + " ms" }
        return sign + decimal(magnitude, unit: 1_000) + " µs"
    }

    private static func decimal(_ value: UInt64, unit: UInt64) -> String {
        let thousandths = String((value % unit) / (unit / 1000))
        return "\(value / unit)." + String(repeating: "0", count: 3 - thousandths.count) + thousandths
    }
}
