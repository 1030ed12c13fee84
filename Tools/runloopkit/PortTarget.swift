import RunLoopKit

/// The port a command talks to: a name of the runtime directory, or an address.
struct PortTarget: Sendable {
    /// How messages call it: the name, or the address as given.
    let label: String
    let remote: RemotePort

    /// Resolves `name`: an `ipc://` or `tcp://` address is used as it is; a name must have
    /// a live owner, else the failure says whether it is unknown or its owner is dead.
    static func resolve(_ name: String) throws(ToolFailure) -> PortTarget {
        if name.contains("://") {
            guard let address = PortAddress(rawValue: name), !name.hasPrefix("inproc://") else {
                throw ToolFailure(.usage, "invalid address '\(name)': use ipc://PATH or tcp://HOST:PORT")
            }
            return PortTarget(label: name, remote: RemotePort(address))
        }
        let entry: RegisteredPortName?
        do throws(PortError) {
            entry = try PortRegistry.registration(named: name)
        } catch {
            throw ToolFailure.from(error, target: name)
        }
        guard let entry else {
            let directory = (try? PortRegistry.runtimeDirectory()) ?? "the runtime directory"
            throw ToolFailure(.unknownName, "unknown port name '\(name)': nothing is registered under it in \(directory)")
        }
        guard entry.isAlive else { throw deadOwner(entry) }
        do throws(PortError) {
            return PortTarget(label: name, remote: try RemotePort(named: name))
        } catch .nameNotFound {
            throw deadOwner(entry) // it died since we looked
        } catch {
            throw ToolFailure.from(error, target: name)
        }
    }

    private static func deadOwner(_ entry: RegisteredPortName) -> ToolFailure {
        let pid = entry.ownerPID.map { "pid \($0)" } ?? "pid unknown"
        return ToolFailure(.deadOwner, "the owner of port '\(entry.name)' (\(pid)) is dead: the name is stale")
    }
}
