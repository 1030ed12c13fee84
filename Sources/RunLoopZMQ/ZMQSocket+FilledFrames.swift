import CZeroMQ
import RunLoopSystem

extension ZMQSocket {
    /// Sends one frame of `byteCount` bytes that `fill` writes in place (exactly
    /// `byteCount` bytes), with the contract of `sendFrame(_:more:dontWait:)`.
    @inlinable
    package func sendFrame(byteCount: Int, more: Bool, dontWait: Bool,
                           _ fill: (UnsafeMutableRawBufferPointer) -> Void) throws(SystemCallError) -> Bool {
        let sent = withUnsafeTemporaryAllocation(byteCount: byteCount, alignment: 16) { buffer in
            fill(buffer)
            return Result { () throws(SystemCallError) in try sendFrame(UnsafeRawBufferPointer(buffer), more: more, dontWait: dontWait) }
        }
        return try sent.get()
    }
}
