import Foundation

/// Number formatting shared by the progress lines, the table and the chart.
enum Format {
    /// A figure with three significant digits at most, no exponent (`12.3`, `0.452`, `1530`).
    static func value(_ value: Double) -> String {
        guard value.isFinite else { return "—" }
        let magnitude = abs(value)
        let decimals = magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : magnitude >= 1 ? 2 : 3
        if magnitude >= 1_000_000_000 { return String(format: "%.3gG", value / 1_000_000_000) }
        if magnitude >= 1_000_000 { return String(format: "%.3gM", value / 1_000_000) }
        return String(format: "%.\(decimals)f", value)
    }

    static func micro(_ value: Double) -> String { Format.value(value) }

    static func ratio(_ value: Double) -> String {
        guard value.isFinite else { return "—" }
        return String(format: value >= 10 ? "%.1f" : "%.2f", value)
    }

    static func seconds(_ value: Double) -> String { String(format: "%.1f s", value) }
}
