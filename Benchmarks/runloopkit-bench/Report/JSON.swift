import Foundation

/// The JSON results: `{"cases":[{"name":…,"metric":…,"lower_is_better":…,"runloopkit":…,
/// "peers":{…}}, …]}`, one entry per case and metric, keys in that order. With
/// `--repeat N` (N > 1) the document starts with `"runs": N`, the figures are the medians,
/// and each entry gains `"runloopkit_spread"`, `"peer_spreads"` and `"ratios"` (by peer),
/// each spread `{"median":…,"min":…,"max":…}`, and `"met"` (by target: true when every
/// run met it).
enum JSONReport {
    static func render(_ outcomes: [CaseOutcome]) -> String {
        let metrics = outcomes.flatMap(\.metrics)
        let entries = metrics.map { metric in
            let peers = metric.peers.map { "\(string($0.name)): \(number($0.value))" }.joined(separator: ", ")
            var entry = "    {\"name\": \(string(metric.caseName)), \"metric\": \(string(metric.metric)), "
                + "\"lower_is_better\": \(metric.lowerIsBetter), \"runloopkit\": \(number(metric.runloopkit)), "
                + "\"peers\": {\(peers)}"
            if let repeated = metric.repeated {
                func spreads(_ byPeer: [String: Spread]) -> String {
                    metric.peers.compactMap { peer in byPeer[peer.name].map { "\(string(peer.name)): \(spread($0))" } }
                        .joined(separator: ", ")
                }
                let verdicts = metric.verdicts.map { verdict in
                    "\(string(verdict.target.description(unit: metric.unit))): \(verdict.verdict.map { "\($0 == .met)" } ?? "null")"
                }
                entry += ",\n     \"runloopkit_spread\": \(repeated.runloopkit.map(spread) ?? "null"), "
                    + "\"peer_spreads\": {\(spreads(repeated.peers))},\n     \"ratios\": {\(spreads(repeated.ratios))}, "
                    + "\"met\": {\(verdicts.joined(separator: ", "))}"
            }
            return entry + "}"
        }
        let runs = metrics.lazy.compactMap(\.repeated?.runs).first.map { "\"runs\": \($0), " } ?? ""
        return "{\(runs)\"cases\": [\n" + entries.joined(separator: ",\n") + "\n]}\n"
    }

    static func spread(_ spread: Spread) -> String {
        "{\"median\": \(number(spread.median)), \"min\": \(number(spread.min)), \"max\": \(number(spread.max))}"
    }

    /// A JSON number with up to four decimals; non-finite figures (a failed measurement) as null.
    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        if value == value.rounded() && abs(value) < 1e15 { return String(Int64(value)) }
        var text = String(format: "%.4f", value)
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() } // 2022020.00001 rounds to a whole number
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
