/// Numbers as the tool prints them.
enum ToolFormat {
    /// "2 s", "0.5 s".
    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }

    static func nanoseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1e9 + Double(duration.components.attoseconds) / 1e9
    }

    /// Microseconds with one decimal: "85.2".
    static func microseconds(_ nanoseconds: Double) -> String {
        let tenths = Int((nanoseconds / 100).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }

    /// Microseconds with one decimal, as a number for JSON.
    static func microsecondsValue(_ nanoseconds: Double) -> Double {
        (nanoseconds / 100).rounded() / 10
    }
}
