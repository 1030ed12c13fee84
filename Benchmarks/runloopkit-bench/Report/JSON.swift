import Foundation

/// The JSON results: `{"cases":[{"name":…,"metric":…,"lower_is_better":…,"runloopkit":…,
/// "peers":{…}}, …]}`, one entry per case and metric, keys in that order.
enum JSONReport {
    static func render(_ outcomes: [CaseOutcome]) -> String {
        let entries = outcomes.flatMap(\.metrics).map { metric in
            let peers = metric.peers.map { "\(string($0.name)): \(number($0.value))" }.joined(separator: ", ")
            return "    {\"name\": \(string(metric.caseName)), \"metric\": \(string(metric.metric)), "
                + "\"lower_is_better\": \(metric.lowerIsBetter), \"runloopkit\": \(number(metric.runloopkit)), "
                + "\"peers\": {\(peers)}}"
        }
        return "{\"cases\": [\n" + entries.joined(separator: ",\n") + "\n]}\n"
    }

    /// A JSON number with up to four decimals; non-finite figures (a failed measurement) as null.
    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        if value == value.rounded() && abs(value) < 1e15 { return String(Int64(value)) }
        var text = String(format: "%.4f", value)
        while text.hasSuffix("0") { text.removeLast() }
        return text
    }

    static func string(_ text: String) -> String {
        var escaped = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            case _ where scalar.value < 0x20: escaped += String(format: "\\u%04x", scalar.value)
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped + "\""
    }
}
