import RunLoopSystem

/// Where a sending thread's connection to one port stands with shared memory
/// (`docs/wire-format.md`, "Shared memory"): a large data component travels in a ring only
/// to a named port of another process of this host that said it maps rings; to any other,
/// as plain frames.
///
/// ```
/// untried ──(a named port of another process: side channel connected)──▶ awaitingWelcome
///    │                                                                       │   │
///    └──(anything else)──▶ unavailable ◀──(no welcome within welcomeWait)───┘   │
///                              ▲                                                 │(welcome read: ring made)
///                              └──(ring broken, forked child)── ready ◀──────────┘
///                                                     │ (the port closed the side channel)
///                                                     └──▶ untried
/// ```
enum SharedRingState {
    /// No large component sent yet, or the port that had the ring is gone.
    case untried
    /// The port's side channel is connected (since `since`); its welcome not read yet.
    /// Components go as plain frames meanwhile.
    case awaitingWelcome(DescriptorSender, since: Deadline)
    /// A ring, given to the port on `channel` once a note that names it was queued (`announced`).
    case ready(SendingRing, channel: DescriptorSender, announced: Bool)
    /// Plain frames for good: not a named port of another process, no side channel, no
    /// welcome in time (a port that does not map rings), a ring that broke, a forked child.
    case unavailable

    /// How long a sender waits for a port's welcome before it takes the port for one that
    /// maps no rings.
    static let welcomeWait = Duration.seconds(2)

    /// How often a sender with a ring checks that the port still holds its side channel
    /// (its owner may have ended, and a new owner of the name knows no ring): notes sent to
    /// a new owner within it are dropped there (`unknownDescriptors`), as messages sent to
    /// an owner that ended are lost.
    static let portCheckInterval = Duration.milliseconds(100)

    /// The side channel of the port at `target`, if it is a named port reached over ipc
    /// (`ipc://<dir>/NAME.sock`: another process's; a named port of this process is reached
    /// over inproc, where a ring would only add a copy).
    static func sideChannelPath(of target: PortAddress) -> String? {
        let address = target.rawValue
        guard address.hasPrefix("ipc://"), address.hasSuffix(".sock") else { return nil }
        return PortDirectory.Registration.descriptorPath(ofSocket: String(address.dropFirst("ipc://".count)))
    }
}
