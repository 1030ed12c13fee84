/// What the name server logs.
extension PortDirectory {
    /// A name's socket file was still there when the name was taken: its owner died
    /// without giving the name back, and the file was removed. Logged at `.debug`.
    func reclaimedStaleName(_ name: String, socketPath: String) {
        RunLoopKitLog.names.debug("stale name reclaimed: its dead owner's socket file was removed",
                                  metadata: ["name": "\(name)", "socket": "\(socketPath)"])
    }
}
