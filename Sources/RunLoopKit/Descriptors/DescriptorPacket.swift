import RunLoopSystem

/// A random 128-bit token that names one message's descriptors on the side channel
/// (`DescriptorSender`, `DescriptorReceiver`): unguessable, so a peer cannot claim
/// descriptors it did not send. Drawn from the system's generator (`getrandom`).
package struct DescriptorToken: Hashable, Sendable, CustomStringConvertible {
    package let high: UInt64
    package let low: UInt64

    package init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A fresh token.
    package static func random() -> DescriptorToken {
        var generator = SystemRandomNumberGenerator()
        return DescriptorToken(high: generator.next(), low: generator.next())
    }

    /// Its 16 bytes, `high` then `low`, each little-endian.
    package var bytes: [UInt8] {
        withUnsafeBytes(of: high.littleEndian, Array.init) + withUnsafeBytes(of: low.littleEndian, Array.init)
    }

    /// The token in 16 bytes (`bytes`); nil for any other count.
    package init?(_ bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        let all = Array(bytes)
        var high: UInt64 = 0
        var low: UInt64 = 0
        for index in 0..<8 {
            high |= UInt64(all[index]) << (8 * index)
            low |= UInt64(all[8 + index]) << (8 * index)
        }
        self.init(high: high, low: low)
    }

    package var description: String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

/// One packet of the descriptor side channel, a unix `SOCK_SEQPACKET` connection: 24 bytes,
/// `52 4c 4b 44` ("RLKD"), version `01`, an operation, two zero bytes, then the token's 16
/// bytes; an `attach` packet carries 1–253 descriptors in one `SCM_RIGHTS` message, a
/// `revoke` none. The port sends one packet the other way, `welcome`, with none.
package enum DescriptorPacket {
    /// The packet's size in bytes.
    package static let size = 24
    package static let version: UInt8 = 1

    package enum Operation: UInt8, Sendable {
        /// The descriptors of the message whose descriptor components name this token.
        case attach = 0
        /// The sender's message with this token was not sent: close its descriptors.
        case revoke = 1
    }

    /// The one packet a port sends, first on each connection it accepts: operation `02`,
    /// the token all zero, no descriptors. It says the port maps shared rings
    /// (`SharedRingLayout`), so the sender may send large data components in one; a port
    /// that never says so gets plain frames. Not an `Operation`: no sender sends it, and a
    /// port takes it from a sender for a malformed packet.
    package static let welcome: [UInt8] = [0x52, 0x4C, 0x4B, 0x44, version, 2, 0, 0] + [UInt8](repeating: 0, count: 16)

    /// The packet a port sends once it mapped a sender's ring: operation `03`, the ring's
    /// token, and one descriptor, one end of a unix `SOCK_SEQPACKET` pair whose other end is
    /// in the port's poll set: the sender sends a byte there when the port asks for it (`armed`) after
    /// queueing a note in the ring (`QueuedNote`). Not an `Operation`, as `welcome`.
    package static func doorbell(_ token: DescriptorToken) -> [UInt8] {
        [0x52, 0x4C, 0x4B, 0x44, version, 3, 0, 0] + token.bytes
    }

    /// The packet's bytes.
    package static func encode(_ operation: Operation, _ token: DescriptorToken) -> [UInt8] {
        [0x52, 0x4C, 0x4B, 0x44, version, operation.rawValue, 0, 0] + token.bytes
    }

    /// The operation and token of a received packet; nil for anything else.
    package static func decode(_ bytes: some Collection<UInt8>) -> (Operation, DescriptorToken)? {
        let all = Array(bytes)
        guard all.count == size, all[0..<4] == [0x52, 0x4C, 0x4B, 0x44], all[4] == version, all[6] == 0, all[7] == 0,
              let operation = Operation(rawValue: all[5]), let token = DescriptorToken(all[8...]) else { return nil }
        return (operation, token)
    }
}
