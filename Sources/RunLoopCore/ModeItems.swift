/// One item of a run-loop mode.
package enum LoopItem {
    case source(InputSource)
    case timer(LoopTimer)
    case observer(LoopObserver)
    case port(any PortBasedSource)
    case descriptor(DescriptorSource)
}

/// The sources, ports, descriptor sources, timers and observers of one mode. Loop thread only.
package final class ModeItems {
    package let mode: LoopMode
    // Loop thread only, changed only in `insert` and `remove`; see architecture.md.
    /// Sorted by `order`, ties in insertion order.
    @exclusivity(unchecked) package private(set) var sources: [InputSource] = []
    @exclusivity(unchecked) package private(set) var ports: [any PortBasedSource] = []
    /// The ports' identities, so that asking whether one of many ports is here costs O(1).
    @exclusivity(unchecked) private var portIDs: Set<ObjectIdentifier> = []
    @exclusivity(unchecked) private(set) var descriptors: [DescriptorSource] = []
    @exclusivity(unchecked) package private(set) var timers: [LoopTimer] = []
    /// Sorted by `order`, ties in insertion order.
    @exclusivity(unchecked) package private(set) var observers: [LoopObserver] = []
    /// The union of the observers' activities, so that an unobserved activity costs nothing.
    @exclusivity(unchecked) private(set) var observedActivities: LoopActivity = []
    /// Up to this many ports, asking whether a port is here compares identities in
    /// `ports`, which is cheaper than hashing into `portIDs`.
    private static let linearSearchLimit = 8

    init(mode: LoopMode) { self.mode = mode }

    /// Whether the mode has anything that can make a run do work (sources, ports,
    /// descriptor sources, live timers).
    var hasSourcesOrTimers: Bool {
        !sources.isEmpty || !ports.isEmpty || !descriptors.isEmpty || timers.contains { $0.isValid }
    }

    /// Whether a source may be signalled: each flag read where the array lies, without
    /// retaining a source (the pass's check before `performIfSignalled`).
    @inline(__always)
    var hasSignalledSource: Bool {
        for index in sources.indices where sources[index].mayBeSignalled { return true }
        return false
    }

    package func contains(_ item: LoopItem) -> Bool {
        switch item {
        case .source(let source): sources.contains { $0 === source }
        case .timer(let timer): timers.contains { $0 === timer }
        case .observer(let observer): observers.contains { $0 === observer }
        case .port(let port): contains(port: port)
        case .descriptor(let source): descriptors.contains { $0 === source }
        }
    }

    /// Whether `port` is here: `contains(.port(port))` inlined, for the pass's checks.
    @inline(__always)
    func contains(port: any PortBasedSource) -> Bool {
        ports.count <= ModeItems.linearSearchLimit
            ? ports.contains { $0 === port } : portIDs.contains(ObjectIdentifier(port))
    }

    /// Adds the item; returns false if it was already here.
    func insert(_ item: LoopItem) -> Bool {
        guard !contains(item) else { return false }
        switch item {
        case .source(let source):
            sources.insert(source, at: sources.firstIndex { $0.order > source.order } ?? sources.endIndex)
        case .timer(let timer):
            timers.append(timer)
        case .observer(let observer):
            observers.insert(observer, at: observers.firstIndex { $0.order > observer.order } ?? observers.endIndex)
            observedActivities.formUnion(observer.activities)
        case .port(let port):
            ports.append(port)
            portIDs.insert(ObjectIdentifier(port))
        case .descriptor(let source):
            descriptors.append(source)
        }
        return true
    }

    /// Removes the item; returns false if it was not here.
    func remove(_ item: LoopItem) -> Bool {
        switch item {
        case .source(let source): return removeFirst(from: &sources) { $0 === source }
        case .timer(let timer): return removeFirst(from: &timers) { $0 === timer }
        case .port(let port):
            portIDs.remove(ObjectIdentifier(port))
            return removeFirst(from: &ports) { $0 === port }
        case .descriptor(let source): return removeFirst(from: &descriptors) { $0 === source }
        case .observer(let observer):
            guard removeFirst(from: &observers, where: { $0 === observer }) else { return false }
            observedActivities = observers.reduce(into: []) { $0.formUnion($1.activities) }
            return true
        }
    }

    /// Every item, for tearing the mode down.
    var allItems: [LoopItem] {
        sources.map(LoopItem.source) + ports.map(LoopItem.port) + descriptors.map(LoopItem.descriptor)
            + timers.map(LoopItem.timer) + observers.map(LoopItem.observer)
    }

    private func removeFirst<T>(from array: inout [T], where match: (T) -> Bool) -> Bool {
        guard let index = array.firstIndex(where: match) else { return false }
        array.remove(at: index)
        return true
    }
}
