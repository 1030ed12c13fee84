import RunLoopSystem
import RunLoopZMQ

/// Naming a port: registered under a name in the per-user runtime directory
/// (`PortDirectory`), where other processes find its ipc socket and its descriptor side
/// channel, and from which this process reaches it over inproc.
extension LocalPort {
    /// Registers the port under `name` (`NSMessagePortNameServer registerPort:name:`): it
    /// binds an ipc socket in the per-user runtime directory. Fails with `nameInUse` if a
    /// live port holds the name (here or in another process); a dead owner's name is taken over.
    public func register(name: String) throws(PortError) {
        try checkOwnerThread()
        guard registration == nil, socket.isOpen else { throw .invalidated }
        let reserved = try PortDirectory.shared.reserve(name)
        do throws(SystemCallError) {
            try socket.bind(reserved.ipcAddress.rawValue)
            do {
                try Kernel.chmod(reserved.socketPath, 0o600) // the directory is 0700 already: belt and braces
            } catch {
                try? socket.unbind(reserved.ipcAddress.rawValue)
                throw error
            }
            descriptorSlot.receiver = try DescriptorReceiver(path: reserved.descriptorPath)
        } catch {
            try? socket.unbind(reserved.ipcAddress.rawValue)
            PortDirectory.shared.withdraw(reserved)
            throw .system(error)
        }
        registration = reserved
        // Its listener, its senders' hang-ups and its timer in the loop's poll set: what a
        // gone sender left closes without another message.
        descriptorSlot.receiver?.watch(on: ThreadRunLoop.current)
        descriptorSlot.receiver?.onQueuedNotes = { [weak self] in self?.queuedNotesMayWait() }
        senderReader.readsProcess = true
        PortDirectory.shared.publish(reserved, inProcess: inProcessAddress)
        registeredName.withLock { $0 = name }
        advertised.withLock { if $0.isInProcess { $0 = reserved.ipcAddress } }
    }

    /// The name the port is registered under, if any. Any thread.
    public var name: String? { registeredName.withLock { $0 } }
}
