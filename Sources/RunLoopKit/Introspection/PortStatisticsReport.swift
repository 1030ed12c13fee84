/// A port's statistics as a statistics query (wire kind 6) carries them to another process:
/// the figures of `PortStatistics`, read at one moment on the port's owner thread.
///
/// On the wire, the reply's one data component is a JSON object of integers with stable
/// keys (`docs/wire-format.md`), `format` first:
///
///     {"format":1,"rightsOutstanding":2,"requestsCancelled":0,"messagesReceived":5,...}
///
/// JSON because any peer reads it with what its language ships (Python's `json`, `jq`),
/// because a key added later breaks no reader (readers ignore the keys they do not know),
/// and because a query is rare, so its few dozen bytes and its parsing cost nothing that
/// matters. `format` changes only if a key changes meaning or goes away; adding one does not.
public struct PortStatisticsReport: Sendable, Hashable, Codable {
    /// The encoding's version: 1.
    public var format: Int
    /// `PortStatistics.rightsOutstanding`.
    public var rightsOutstanding: Int
    /// `PortStatistics.requestsCancelled`.
    public var requestsCancelled: Int
    /// `PortStatistics.messagesReceived`.
    public var messagesReceived: Int
    /// `PortStatistics.messagesDropped`.
    public var messagesDropped: Int
    /// `PortStatistics.repliesFailed`.
    public var repliesFailed: Int
    /// `PortStatistics.handlerErrors`.
    public var handlerErrors: Int
    /// `PortStatistics.clientsRefused`.
    public var clientsRefused: Int

    /// The format this library writes.
    public static let currentFormat = 1

    /// The keys of format 1, in the order they are written.
    static let keys = ["format", "rightsOutstanding", "requestsCancelled", "messagesReceived", "messagesDropped",
                       "repliesFailed", "handlerErrors", "clientsRefused"]

    /// The figures of `statistics` now.
    public init(_ statistics: PortStatistics) {
        format = Self.currentFormat
        rightsOutstanding = statistics.rightsOutstanding
        requestsCancelled = statistics.requestsCancelled
        messagesReceived = statistics.messagesReceived
        messagesDropped = statistics.messagesDropped
        repliesFailed = statistics.repliesFailed
        handlerErrors = statistics.handlerErrors
        clientsRefused = statistics.clientsRefused
    }

    private var values: [Int] {
        [format, rightsOutstanding, requestsCancelled, messagesReceived, messagesDropped, repliesFailed,
         handlerErrors, clientsRefused]
    }

    /// The JSON the reply carries: one line, UTF-8, the keys in `keys` order.
    public var json: String {
        "{" + zip(Self.keys, values).map { "\"\($0)\":\($1)" }.joined(separator: ",") + "}"
    }

    /// The figures in a reply's JSON: nil unless it is an object whose `format` is 1 or more
    /// and that holds every key of format 1 as an integer. Keys it does not know are skipped.
    public init?(json bytes: some Collection<UInt8>) {
        guard let object = FlatJSON.integers(Array(bytes)), let format = object["format"], format >= 1 else {
            return nil
        }
        var values: [Int] = []
        for key in Self.keys {
            guard let value = object[key] else { return nil }
            values.append(value)
        }
        self.format = format
        rightsOutstanding = values[1]
        requestsCancelled = values[2]
        messagesReceived = values[3]
        messagesDropped = values[4]
        repliesFailed = values[5]
        handlerErrors = values[6]
        clientsRefused = values[7]
    }
}

/// Reads a flat JSON object: its integer members by key. Members of other simple types
/// (strings, booleans, null, fractions) are skipped; nested objects or arrays, or anything
/// not JSON, make it nil. Enough for a statistics reply, whatever later formats add.
enum FlatJSON {
    static func integers(_ bytes: [UInt8]) -> [String: Int]? {
        var reader = Reader(bytes: bytes)
        var result: [String: Int] = [:]
        reader.skipSpace()
        guard reader.take(UInt8(ascii: "{")) else { return nil }
        reader.skipSpace()
        if reader.take(UInt8(ascii: "}")) { return reader.atEnd ? result : nil }
        while true {
            reader.skipSpace()
            guard let key = reader.string() else { return nil }
            reader.skipSpace()
            guard reader.take(UInt8(ascii: ":")) else { return nil }
            reader.skipSpace()
            if reader.peek == UInt8(ascii: "\"") {
                guard reader.string() != nil else { return nil }
            } else {
                guard let token = reader.scalar() else { return nil }
                if let value = Int(token) { result[key] = value }
                else if !["true", "false", "null"].contains(token), Double(token) == nil { return nil }
            }
            reader.skipSpace()
            if reader.take(UInt8(ascii: ",")) { continue }
            guard reader.take(UInt8(ascii: "}")) else { return nil }
            return reader.atEnd ? result : nil
        }
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        var atEnd: Bool {
            mutating get { skipSpace(); return index == bytes.count }
        }
        var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipSpace() {
            while let byte = peek, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            guard peek == byte else { return false }
            index += 1
            return true
        }

        /// A string, its escapes kept as they are (keys of interest have none).
        mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = index
            while let byte = peek {
                if byte == UInt8(ascii: "\\") {
                    index += 2
                    continue
                }
                if byte == UInt8(ascii: "\"") {
                    defer { index += 1 }
                    return String(decoding: bytes[start..<index], as: UTF8.self)
                }
                index += 1
            }
            return nil
        }

        /// A number, `true`, `false` or `null`: the bytes up to the next delimiter.
        mutating func scalar() -> String? {
            let start = index
            while let byte = peek, byte != UInt8(ascii: ","), byte != UInt8(ascii: "}"),
                  byte != 0x20, byte != 0x09, byte != 0x0A, byte != 0x0D,
                  byte != UInt8(ascii: "{"), byte != UInt8(ascii: "["), byte != UInt8(ascii: "\"") {
                index += 1
            }
            return index > start ? String(decoding: bytes[start..<index], as: UTF8.self) : nil
        }
    }
}
