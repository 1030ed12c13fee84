import RunLoopZMQ

/// A CURVE key pair for a port that accepts tcp (or ipc) peers only when they know its
/// public key, and encrypts their traffic (ZeroMQ's CURVE, from libzmq).
///
/// Give `publicKey` to the peers; keep the pair itself to the port's process. Neither
/// `description` nor RunLoopKit's logs ever show the secret key.
public struct PortKeyPair: Sendable, CustomStringConvertible, CustomReflectable {
    /// The public key, as 40 characters of Z85 text, for `RemotePort(_:curveServerKey:)`.
    public var publicKey: String { publicCurveKey.z85 }

    let publicCurveKey: ZMQCurveKey
    let secretCurveKey: ZMQCurveKey

    /// A new random key pair (`zmq_curve_keypair`).
    public static func generate() throws(PortError) -> PortKeyPair {
        do {
            let (publicKey, secretKey) = try ZMQCurve.generateKeyPair()
            return PortKeyPair(publicCurveKey: publicKey, secretCurveKey: secretKey)
        } catch {
            throw .system(error)
        }
    }

    /// A key pair from its two Z85 texts, or nil if either is not a valid key.
    public init?(publicKey: String, secretKey: String) {
        guard let publicCurveKey = ZMQCurveKey(z85: publicKey), let secretCurveKey = ZMQCurveKey(z85: secretKey) else {
            return nil
        }
        self.init(publicCurveKey: publicCurveKey, secretCurveKey: secretCurveKey)
    }

    init(publicCurveKey: ZMQCurveKey, secretCurveKey: ZMQCurveKey) {
        self.publicCurveKey = publicCurveKey
        self.secretCurveKey = secretCurveKey
    }

    public var description: String { "PortKeyPair(public: \(publicKey), secret: <redacted>)" }

    /// `dump` and debuggers see the public key only.
    public var customMirror: Mirror { Mirror(self, children: ["publicKey": publicKey]) }
}
