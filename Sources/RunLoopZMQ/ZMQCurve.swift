import RunLoopSystem
import CZeroMQ

/// A CURVE key (public or secret): 32 bytes, written as 40 characters of Z85 text.
package struct ZMQCurveKey: Hashable, Sendable, CustomStringConvertible {
    /// The size of a key in bytes.
    package static let byteCount = 32
    /// The size of a key in Z85 characters.
    package static let z85Count = 40

    /// The key's 32 bytes.
    package let bytes: [UInt8]

    /// A key from its 32 bytes; `nil` for any other count.
    package init?(bytes: [UInt8]) {
        guard bytes.count == ZMQCurveKey.byteCount else { return nil }
        self.bytes = bytes
    }

    /// A key from its 40-character Z85 text, via `zmq_z85_decode`; `nil` if the text is not
    /// 40 valid Z85 characters.
    package init?(z85: String) {
        guard z85.utf8.count == ZMQCurveKey.z85Count, !z85.utf8.contains(0) else { return nil }
        var bytes = [UInt8](repeating: 0, count: ZMQCurveKey.byteCount)
        let decoded = bytes.withUnsafeMutableBufferPointer { buffer in
            zmq_z85_decode(buffer.baseAddress, z85) != nil
        }
        guard decoded else { return nil }
        self.bytes = bytes
    }

    /// The key as 40 characters of Z85 text, via `zmq_z85_encode`.
    package var z85: String {
        var text = [CChar](repeating: 0, count: ZMQCurveKey.z85Count + 1)
        _ = bytes.withUnsafeBufferPointer { bytes in
            zmq_z85_encode(&text, bytes.baseAddress, bytes.count) // 32 bytes always encode
        }
        return ZMQCurveKey.string(fromZ85Text: text)
    }

    /// The 40 characters of a NUL-terminated Z85 buffer as a `String`.
    package static func string(fromZ85Text text: [CChar]) -> String {
        String(decoding: text.prefix(z85Count).lazy.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Public keys are meant to be shown; a secret key's text should not reach logs.
    package var description: String { "ZMQCurveKey(\(z85.prefix(8))…)" }
}

/// CURVE security (elliptic-curve encryption and authentication of tcp and ipc traffic).
package enum ZMQCurve {
    /// Whether this libzmq was built with CURVE, via `zmq_has("curve")`.
    package static var isAvailable: Bool { ZMQ.has("curve") }

    /// Generates a new long-term key pair, via `zmq_curve_keypair`.
    ///
    /// - Throws: `notSupported` when libzmq was built without CURVE.
    package static func generateKeyPair() throws(SystemCallError) -> (publicKey: ZMQCurveKey, secretKey: ZMQCurveKey) {
        guard isAvailable else { throw SystemCallError(code: .notSupported, call: "zmq_curve_keypair") }
        var publicText = [CChar](repeating: 0, count: ZMQCurveKey.z85Count + 1)
        var secretText = [CChar](repeating: 0, count: ZMQCurveKey.z85Count + 1)
        try zmqCall("zmq_curve_keypair") { zmq_curve_keypair(&publicText, &secretText) }
        guard let publicKey = ZMQCurveKey(z85: ZMQCurveKey.string(fromZ85Text: publicText)),
              let secretKey = ZMQCurveKey(z85: ZMQCurveKey.string(fromZ85Text: secretText))
        else {
            throw SystemCallError(code: .invalidArgument, call: "zmq_curve_keypair") // libzmq broke its contract
        }
        return (publicKey, secretKey)
    }
}
