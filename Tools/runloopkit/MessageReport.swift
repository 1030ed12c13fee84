import Foundation
import RunLoopKit

/// A received message, as text for people and as JSON for scripts.
struct MessageReport: Encodable {
    /// A component: `data` (UTF-8 text) or `base64` (other bytes), `port` (an address), or
    /// `descriptor` (the number of a descriptor received, closed with the message).
    struct Component: Encodable {
        var data: String?
        var base64: String?
        var port: String?
        var bytes: Int?
        var descriptor: Int32?
    }

    let id: Int32
    let components: [Component]
    let replyPort: String?

    init(_ message: LoopMessage) {
        id = message.id
        components = message.components.map { component in
            switch component {
            case .data(let bytes):
                if let text = String(validating: bytes, as: UTF8.self) {
                    Component(data: text, bytes: bytes.count)
                } else {
                    Component(base64: Data(bytes).base64EncodedString(), bytes: bytes.count)
                }
            case .port(let port):
                Component(port: port.address.rawValue)
            case .descriptor(let descriptor):
                Component(descriptor: descriptor.descriptor ?? -1)
            }
        }
        replyPort = message.replyPort?.address.rawValue
    }

    /// The lines to print: the text of each UTF-8 data component as it is (so a plain
    /// text reply prints as itself), other components described.
    var lines: [String] {
        guard !components.isEmpty else { return ["(empty reply)"] }
        return components.map { component in
            if let data = component.data { return data }
            if let base64 = component.base64 { return "(\(component.bytes ?? 0) bytes, base64) \(base64)" }
            if let descriptor = component.descriptor { return "(descriptor) \(descriptor)" }
            return "(port) \(component.port ?? "")"
        }
    }
}
