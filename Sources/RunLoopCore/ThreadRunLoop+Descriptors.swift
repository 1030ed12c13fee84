import RunLoopSystem
import Glibc

/// Descriptor sources on the loop, and step 9's hand-out of what the poll set reported for
/// them. Adding, removing and asking on the loop's own thread.
extension ThreadRunLoop {
    /// Adds a descriptor source to `mode`: its descriptor is watched, from the loop's next
    /// sleep on, whenever the loop runs in one of the source's modes.
    public func add(_ source: DescriptorSource, to mode: LoopMode = .default) {
        addItem(.descriptor(source), binding: source.binding, to: mode)
    }

    public func remove(_ source: DescriptorSource, from mode: LoopMode = .default) {
        assertOwnerThread()
        removeItem(.descriptor(source), from: mode)
    }

    /// Whether the source is in `mode` (for `.common`: added through the common set).
    public func contains(_ source: DescriptorSource, in mode: LoopMode = .default) -> Bool {
        contains(.descriptor(source), in: mode)
    }

    /// The source's interest changed: brought in line before the next sleep.
    func descriptorSourceChanged(_ source: DescriptorSource) {
        guard let registration = descriptors.registration(of: source) else { return }
        descriptors.markChanged(registration)
    }

    /// After an invalidation, a loss or at teardown: out of every mode and the poll set,
    /// then the handler released and an owned descriptor closed.
    func removeDescriptorSourceEverywhere(_ source: DescriptorSource) {
        source.markInvalidated()
        removeEverywhere(.descriptor(source))
        source.removedAfterInvalidation()
    }

    /// Step 9 for descriptor sources and the main queue: hands out, in the order the poll
    /// set reported them, the events of those that are in the running mode and still want
    /// them; each handler call (and each drain of the main queue) is a handled source.
    @inline(__always)
    func fireReadyDescriptors(in items: ModeItems) -> Bool {
        guard !descriptors.ready.isEmpty else { return false }
        return fireReadyDescriptorsNow(in: items)
    }

    private func fireReadyDescriptorsNow(in items: ModeItems) -> Bool {
        var handled = false
        for registration in descriptors.takeReady() {
            let events = registration.readyEvents
            registration.readyEvents = 0
            switch registration.client {
            case .source(let source):
                if let error = registration.lostError {
                    reportLost(source, error)
                    handled = true
                } else if items.contains(.descriptor(source)), source.fire(readyEpollEvents: events) {
                    handled = true
                }
            case .mainQueue:
                if mainQueueWanted(in: items) {
                    drainMainQueue()
                    handled = true
                }
            case .housekeeping(let housekeeping):
                // Never a handled source; skipped if an earlier handler of this batch removed it.
                if descriptors.isRegistered(registration) { housekeeping.handler() }
            case .port:
                break // ports are queued by `PortSourceTable`
            }
        }
        return handled
    }

    private func reportLost(_ source: DescriptorSource, _ error: SystemCallError) {
        RunLoopKitLog.loop.debug("descriptor source lost its descriptor", metadata: [
            "descriptor": "\(source.descriptor)", "error": "\(error)",
        ])
        // Closed behind its back (EBADF, ENOENT) or watched by another source (EEXIST): not ours to close.
        source.lost(error, descriptorIsGone: error.errno != EPERM)
        removeDescriptorSourceEverywhere(source)
    }
}
