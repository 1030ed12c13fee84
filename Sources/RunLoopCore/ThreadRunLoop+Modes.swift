/// Adding and removing sources, ports, timers and observers, and the common-modes set.
/// All of it on the loop's own thread.
extension ThreadRunLoop {
    /// Adds a custom input source to `mode` (`CFRunLoopAddSource`); its schedule callback
    /// runs once for each mode it newly joins.
    public func add(_ source: InputSource, to mode: LoopMode = .default) {
        addItem(.source(source), binding: source.lifetime, to: mode)
    }

    /// Removes a custom input source from `mode`; its cancel callback runs if it was there.
    public func remove(_ source: InputSource, from mode: LoopMode = .default) {
        assertOwnerThread()
        removeItem(.source(source), from: mode)
    }

    /// Adds a timer to `mode` (`CFRunLoopAddTimer`). Adding never fires it.
    public func add(_ timer: LoopTimer, to mode: LoopMode = .default) {
        addItem(.timer(timer), binding: timer.lifetime, to: mode)
    }

    public func remove(_ timer: LoopTimer, from mode: LoopMode = .default) {
        assertOwnerThread()
        removeItem(.timer(timer), from: mode)
    }

    /// Adds an observer to `mode` (`CFRunLoopAddObserver`).
    public func add(_ observer: LoopObserver, to mode: LoopMode = .default) {
        addItem(.observer(observer), binding: observer.lifetime, to: mode)
    }

    public func remove(_ observer: LoopObserver, from mode: LoopMode = .default) {
        assertOwnerThread()
        removeItem(.observer(observer), from: mode)
    }

    /// Whether the source is in `mode` (for `.common`: added through the common set).
    public func contains(_ source: InputSource, in mode: LoopMode = .default) -> Bool {
        contains(.source(source), in: mode)
    }

    public func contains(_ timer: LoopTimer, in mode: LoopMode = .default) -> Bool {
        contains(.timer(timer), in: mode)
    }

    public func contains(_ observer: LoopObserver, in mode: LoopMode = .default) -> Bool {
        contains(.observer(observer), in: mode)
    }

    /// An item invalidated on another thread is in no mode from then on, as after
    /// `CFRunLoopTimerInvalidate`, even before this thread has taken it off its lists.
    func contains(_ item: LoopItem, in mode: LoopMode) -> Bool {
        assertOwnerThread()
        return item.isValid && items(of: mode)?.contains(item) == true
    }

    /// Adds `mode` to the common set (`CFRunLoopAddCommonMode`): every item already in
    /// `.common` joins it now, and every item added to `.common` later joins it too.
    public func addCommonMode(_ mode: LoopMode) {
        assertOwnerThread()
        guard mode != .common, commonModes.insert(mode).inserted else { return }
        for item in commonItems.allItems { insert(item, into: mode) }
    }

    /// The modes that have ever held an item (not counting `.common` itself).
    public var allModes: [LoopMode] {
        assertOwnerThread()
        return Array(modes.keys)
    }

    // MARK: - Internals shared with ports

    package func items(of mode: LoopMode) -> ModeItems? {
        mode == .common ? commonItems : modes[mode]
    }

    package func addItem(_ item: LoopItem, binding: LoopItemLifetime?, to mode: LoopMode) {
        assertOwnerThread()
        guard lifecycle == .open, item.isValid else { return }
        if let binding {
            precondition(binding.bind(to: self), "an item can be scheduled on one run loop only")
        }
        if mode == .common {
            guard commonItems.insert(item) else { return }
            for commonMode in commonModes { insert(item, into: commonMode) }
        } else {
            insert(item, into: mode)
        }
    }

    package func removeItem(_ item: LoopItem, from mode: LoopMode) {
        if mode == .common {
            guard commonItems.remove(item) else { return }
            for commonMode in commonModes { remove(item, fromMode: commonMode) }
        } else {
            remove(item, fromMode: mode)
        }
    }

    func removeSourceEverywhere(_ source: InputSource) {
        removeEverywhere(.source(source))
        source.releaseCallbacks()
    }

    func removeTimerEverywhere(_ timer: LoopTimer) {
        removeEverywhere(.timer(timer))
        timer.releaseBody()
    }

    func removeObserverEverywhere(_ observer: LoopObserver) {
        removeEverywhere(.observer(observer))
        observer.releaseCallback()
    }

    package func removeEverywhere(_ item: LoopItem) {
        _ = commonItems.remove(item)
        for mode in modes.keys { remove(item, fromMode: mode) }
    }

    /// Removes every item of a mode from the whole loop (teardown).
    func removeAll(_ items: ModeItems) {
        for item in items.allItems {
            switch item {
            case .source(let source): removeSourceEverywhere(source)
            case .timer(let timer): removeTimerEverywhere(timer)
            case .observer(let observer): removeObserverEverywhere(observer)
            case .port: removeEverywhere(item)
            case .descriptor(let source): removeDescriptorSourceEverywhere(source) // closes an owned descriptor
            }
        }
    }

    private func insert(_ item: LoopItem, into mode: LoopMode) {
        let items = modes[mode] ?? {
            let created = ModeItems(mode: mode)
            modes[mode] = created
            return created
        }()
        guard items.insert(item) else { return }
        switch item {
        case .source(let source):
            source.scheduled(on: self, mode: mode)
        case .port(let port):
            ports.added(port, descriptors: &descriptors)
        case .descriptor(let source):
            descriptors.sourceAdded(source)
        case .timer, .observer:
            break
        }
    }

    private func remove(_ item: LoopItem, fromMode mode: LoopMode) {
        guard let items = modes[mode], items.remove(item) else { return }
        switch item {
        case .source(let source): source.cancelled(on: self, mode: mode)
        case .port(let port): ports.removed(port, descriptors: &descriptors, poller: poller)
        case .descriptor(let source): descriptors.sourceRemoved(source, poller: poller)
        case .timer, .observer: break
        }
    }
}

extension LoopItem {
    var isValid: Bool {
        switch self {
        case .source(let source): source.isValid
        case .timer(let timer): timer.isValid
        case .observer(let observer): observer.isValid
        case .port: true
        case .descriptor(let source): source.isValid
        }
    }
}
