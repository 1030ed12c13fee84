/// A name in the runtime directory, as `PortRegistry` finds it: who holds it, if anyone.
public struct RegisteredPortName: Sendable, Hashable {
    /// The port name (see `PortName`).
    public let name: String
    /// Whether a live process holds the name's lock: its port can be sent to.
    public let isAlive: Bool
    /// The live owner's process id; for a dead name, the last owner's as written in its
    /// lock file. Nil when it is not (yet) readable.
    public let ownerPID: Int32?
    /// The name's ipc address, where its owner receives.
    public let address: PortAddress

    public init(name: String, isAlive: Bool, ownerPID: Int32?, address: PortAddress) {
        self.name = name
        self.isAlive = isAlive
        self.ownerPID = ownerPID
        self.address = address
    }
}
