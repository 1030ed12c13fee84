import RunLoopSystem

/// Running the loop: the run variants and the pass, which follows the guide's sequence
/// of events step by step. Loop thread only.
extension ThreadRunLoop {
    /// Runs in the default mode until `stop()` or until the mode has nothing left
    /// (`CFRunLoopRun`). Unlike `-[NSRunLoop run]`, `stop()` does end it.
    public func run() {
        _ = run(mode: .default, until: .distantFuture, returnAfterSourceHandled: false)
    }

    /// Runs in the default mode until `deadline`, `stop()`, or until the mode has nothing left.
    public func run(until deadline: Deadline) {
        _ = run(mode: .default, until: deadline, returnAfterSourceHandled: false)
    }

    /// Runs once in `mode` until a non-timer source has been handled or `deadline` passes
    /// (`-[NSRunLoop runMode:beforeDate:]`). Returns true when a source was handled; false
    /// when the loop could not run (empty mode), timed out, was stopped or failed.
    @discardableResult
    public func run(mode: LoopMode, before deadline: Deadline) -> Bool {
        run(mode: mode, until: deadline, returnAfterSourceHandled: true) == .handledSource
    }

    /// Runs in `mode` for at most `timeout` (`CFRunLoopRunInMode`). A timeout of zero or
    /// less makes one pass without sleeping.
    public func run(mode: LoopMode, timeout: Duration, returnAfterSourceHandled: Bool) -> RunResult {
        run(mode: mode, until: .after(timeout), returnAfterSourceHandled: returnAfterSourceHandled)
    }

    /// Runs in `mode` until `deadline` (`CFRunLoopRunSpecific`): returns `.finished` at once
    /// if the mode has no sources or timers, else tells the observers of entry, makes
    /// passes until a result, and tells them of exit. Runs nest, in any mode. A run whose
    /// poll set or wait the kernel refuses returns `.failed` with the error (logged), and
    /// never traps.
    public func run(mode: LoopMode, until deadline: Deadline, returnAfterSourceHandled: Bool) -> RunResult {
        assertOwnerThread()
        guard lifecycle == .open else { return .finished }
        prepareMainQueueIfNeeded(for: mode)
        guard let found = items(forRunning: mode) else { return .finished }
        // Lent to the run, not retained: `modes` holds every mode's items until the loop's
        // teardown, at its thread's exit, which no run outlives.
        return found._withUnsafeGuaranteedRef { items in
            guard !isEmpty(items) else { return .finished }
            runStack.append(Unmanaged.passUnretained(items))
            defer { runStack.removeLast() }
            notifyObservers(of: .entry, in: items) //                           step 1
            let result = makePasses(in: items, until: deadline, returnAfterSourceHandled: returnAfterSourceHandled)
            notifyObservers(of: .exit, in: items) //                            step 10
            return result
        }
    }

    /// The items of `mode` (held by `modes`), nil if it has none or is `.common` (never run
    /// itself). The last run's mode (a worker runs one mode again and again) is answered inline.
    @inline(__always)
    private func items(forRunning mode: LoopMode) -> Unmanaged<ModeItems>? {
        if let last = lastRunItems, last._withUnsafeGuaranteedRef({ $0.mode == mode }) { return last }
        return itemsLookedUp(forRunning: mode)
    }

    private func itemsLookedUp(forRunning mode: LoopMode) -> Unmanaged<ModeItems>? {
        guard mode != .common else { return nil }
        guard let items = modes[mode] ?? itemsForMainQueue(mode) else { return nil }
        lastRunItems = Unmanaged.passUnretained(items)
        return lastRunItems
    }

    /// Steps 2 to 9, repeated until the run has a result.
    ///
    /// Most passes have nothing to do for most steps. Each step's "nothing to do" check is
    /// an inlined guard in front of the function that does the work (`fireDueTimers`,
    /// `fireReadyDescriptors`, `performQueuedRequests`, `notifyObservers`,
    /// `runControlActions`; the instruments' per-pass calls are inlined whole), so that a
    /// pass runs none of the code of a step it skips.
    /// (hot-path: cheap-primitive (docs/optimization-tips.md))
    private func makePasses(in items: ModeItems, until deadline: Deadline, returnAfterSourceHandled: Bool) -> RunResult {
        if takeStopRequest() { return .stopped }
        let pollOnly = deadline != .distantFuture && deadline <= .now() // no clock read for `run()`
        while true {
            let pass = instruments.passBegins()
            // A test inlined at each exit; the report only with metrics (a pass begun without
            // them has no start time). Calling `passEnds` from the defer outlined it, a call a pass.
            defer { if pass.time != 0 { passEnded(pass) } }
            runControlActions()
            notifyObservers(of: .beforeTimers, in: items) //                    step 2
            notifyObservers(of: .beforeSources, in: items) //                   step 3
            var handledSource = fireInputSources(in: items) //                  step 4
            var readyPort = ports.nextReady(in: items) //                       step 5
            // A ready port skips the sleep, but level-triggered descriptors are still looked
            // at, so that a busy port cannot starve them (nor keep them out of the poll set).
            if readyPort == nil || descriptors.watchesLevelTriggered || descriptors.needsApplying(for: items) {
                do { //                                                         steps 6-8
                    try sleep(in: items, until: deadline, pollOnly: pollOnly || handledSource || readyPort != nil)
                } catch {
                    return failed(error, in: items)
                }
                if readyPort == nil { readyPort = ports.nextReady(in: items) }
            }
            fireDueTimers(in: items) //                                         step 9
            if fireReadyDescriptors(in: items) { handledSource = true } //       step 9
            // Moved out of the variable, which the pass does not read again: the delivery
            // borrows it without a retain of its own.
            if let readyPort = consume readyPort, deliverMessages(from: readyPort, in: items, returnAfterSourceHandled) { // step 9
                handledSource = true
            }
            if let result = passResult(items, deadline, handledSource, returnAfterSourceHandled) {
                return result
            }
        }
    }

    /// The end of a pass measured with metrics.
    @inline(never)
    private func passEnded(_ pass: LoopInstruments.PassStart) {
        instruments.passEnds(pass)
    }

    /// Step 4: perform requests (all queued ones, FIFO), then signalled sources in order.
    private func fireInputSources(in items: ModeItems) -> Bool {
        var handled = performQueuedRequests(in: items.mode)
        // Most passes find no source signalled (a worker's keep-alive is one that never is
        // until it stops): the flags are read first, relaxed, so that such a pass retains no
        // source and makes no atomic exchange. (hot-path: cheap-primitive (docs/optimization-tips.md))
        guard items.hasSignalledSource else { return handled }
        for source in items.sources where source.performIfSignalled() {
            handled = true
        }
        return handled
    }

    /// Steps 6 to 8: tell observers, sleep in the poll set until a port, the next timer,
    /// the deadline or a wake-up, tell observers. When a source was just handled or the
    /// run has no time, it only looks (no sleep, so no sleep notifications), as CF does.
    /// Throws what the kernel refused: a port's or the main queue's descriptor (it is tried
    /// again at the next sleep), or the wait itself.
    private func sleep(in items: ModeItems, until deadline: Deadline, pollOnly: Bool) throws(SystemCallError) {
        // Changes of what is watched are applied once, now; a descriptor refused meanwhile
        // is ready (with its error), so the pass only looks.
        try descriptors.applyChanges(runningMode: items, mainQueueWanted: mainQueueWanted(in: items), poller: poller)
        let pollOnly = pollOnly || !descriptors.ready.isEmpty
        if !pollOnly { notifyObservers(of: .beforeWaiting, in: items) } //      step 6
        let wakeTime = min(deadline, timerWakeTime(in: items))
        let asleepSince = instruments.sleepBegins()
        var failure: SystemCallError?
        do { //                                                                 step 7
            let readyCount = try poller.wait(until: wakeTime, poll: pollOnly)
            for index in 0..<readyCount {
                let (token, events) = poller.readyDescriptor(at: index)
                // A port's report carries its port source: queued without another look-up.
                if let port = descriptors.reported(token, events: events) {
                    ports.descriptorReady(port, runningMode: items)
                }
            }
        } catch {
            failure = error
        }
        instruments.sleepEnds(since: asleepSince, slept: !pollOnly)
        runControlActions() // finish invalidations made from other threads while asleep
        if !pollOnly { notifyObservers(of: .afterWaiting, in: items) } //       step 8
        if let failure { throw failure }
    }

    /// Ends a run whose sleep failed: logs the error (a run that returns nothing, such as
    /// `run()`, has no other way to tell it) and returns it as the run's result.
    private func failed(_ error: SystemCallError, in items: ModeItems) -> RunResult {
        RunLoopKitLog.loop.error("a run of the loop ended: the kernel refused its poll set or its wait",
                                 metadata: ["mode": "\(items.mode.rawValue)", "error": "\(error)"])
        return .failed(error)
    }

    /// The most messages one pass delivers from one port, and the longest it spends on them
    /// after the first.
    static let portBatchLimit = 64
    static let portBatchNanoseconds: UInt64 = 500_000
    /// How often a batch reads the clock: after every this many messages. A clock read
    /// costs about as much as a tenth of a small message's whole delivery; so a batch ends
    /// after its 500 µs and at most three more handlers.
    static let portBatchClockStride = 4

    /// Step 9 for ports: delivers a batch of a ready port's messages — one when the run
    /// returns after a handled source, else up to `portBatchLimit` within 500 µs of the
    /// first (the clock read after the first, so that a lone message, a request or a ping,
    /// reaches its handler without a clock read, then after every `portBatchClockStride`) —
    /// then requeues the port at the back of the ready queue until a receive finds it
    /// drained, or, after the one message of a run that returns, until `hasPendingMessage()` does
    /// (`PortSourceTable.didDeliver(from:_:askingFirst:)`). The batch ends at once when a
    /// handler stops the loop, takes the port out of the loop or pauses it (a message
    /// stream's back-pressure), or runs the loop itself (a nested run), so that no timer,
    /// source or other port waits behind more than one batch. It delivers nothing if the
    /// port, taken at step 5 or at the wake-up, has since left the running mode or been
    /// paused (by a control action, a timer or a descriptor source of this pass). Returns
    /// whether a message was delivered.
    private func deliverMessages(from port: PortSourceTable.Entry, in items: ModeItems,
                                 _ returnAfterSourceHandled: Bool) -> Bool {
        guard port.isRegistered, !port.isPaused, items.contains(port: port.port) else { return false }
        ports.willDeliver(from: port)
        let limit = returnAfterSourceHandled ? 1 : ThreadRunLoop.portBatchLimit
        let passes = instruments.passes
        var started: UInt64 = 0
        var delivered = false
        var count = 0
        var outcome = PortDelivery.empty
        repeat {
            outcome = port.port.handleOneMessage()
            count += 1
            if outcome == .delivered {
                instruments.messageHandled()
                delivered = true
            }
            if count == 1 && limit > 1 && outcome != .empty { started = Deadline.now().rawValue }
        } while outcome != .empty && count < limit && port.isRegistered && !port.isPaused
            && instruments.passes == passes && !stopRequested.load(ordering: .relaxed)
            && (count % ThreadRunLoop.portBatchClockStride != 0
                || Deadline.now().rawValue &- started < ThreadRunLoop.portBatchNanoseconds)
        ports.didDeliver(from: port, outcome, askingFirst: limit == 1)
        return delivered
    }

    /// Step 9 for timers: fires each due timer once, earliest first.
    @inline(__always)
    private func fireDueTimers(in items: ModeItems) {
        guard !items.timers.isEmpty else { return }
        fireDueTimersNow(in: items)
    }

    private func fireDueTimersNow(in items: ModeItems) {
        let now = Deadline.now()
        guard items.timers.contains(where: { $0.isValid && $0.fireDate <= now }) else { return } // no allocation
        let due = items.timers.filter { $0.isValid && $0.fireDate <= now }.sorted { $0.fireDate < $1.fireDate }
        for timer in due where timer.isValid && timer.fireDate <= now {
            timer.fire()
        }
    }

    /// Consumes a `stop()`, if one came: a plain load first, and the exchange that takes
    /// it (and acquires what the stopping thread did before) only when it is set, so that
    /// a pass without one makes no locked instruction for it. A stop stored just after the
    /// load is found by the next pass: `stop()` wakes the loop.
    @inline(__always)
    private func takeStopRequest() -> Bool {
        stopRequested.load(ordering: .relaxed) && stopRequested.exchange(false, ordering: .acquiringAndReleasing)
    }

    /// How a run ends after a pass, in `__CFRunLoopRun`'s order; nil to go on.
    private func passResult(_ items: ModeItems, _ deadline: Deadline, _ handledSource: Bool,
                            _ returnAfterSourceHandled: Bool) -> RunResult? {
        if handledSource && returnAfterSourceHandled { return .handledSource }
        if deadline != .distantFuture && Deadline.now() >= deadline { return .timedOut }
        if takeStopRequest() { return .stopped }
        if isEmpty(items) { return .finished }
        return nil
    }

    /// When to wake for the mode's timers: the latest fire date that is not after any
    /// timer's latest acceptable time (fire date + tolerance), so timers whose tolerance
    /// windows overlap fire in one wake-up and none fires later than its tolerance.
    func timerWakeTime(in items: ModeItems) -> Deadline {
        var limit = Deadline.distantFuture
        for timer in items.timers where timer.isValid { limit = min(limit, timer.latestFireDate) }
        guard limit != .distantFuture else { return .distantFuture }
        var wake = Deadline(rawValue: 0)
        for timer in items.timers where timer.isValid && timer.fireDate <= limit {
            wake = max(wake, timer.fireDate)
        }
        return wake
    }

    /// Tells the mode's observers of `activity`, in their order.
    @inline(__always)
    func notifyObservers(of activity: LoopActivity, in items: ModeItems) {
        guard items.observedActivities.contains(activity) else { return }
        notifyObserversInOrder(of: activity, in: items)
    }

    private func notifyObserversInOrder(of activity: LoopActivity, in items: ModeItems) {
        for observer in items.observers where observer.isValid && observer.activities.contains(activity) {
            observer.notify(activity)
        }
    }

    /// A mode is empty when it has no sources, ports or live timers, no perform request is
    /// waiting for it and (on the main loop, in a common mode) the main queue has no work.
    /// The common mode, with a source or a port, answers in the inlined test.
    @inline(__always)
    func isEmpty(_ items: ModeItems) -> Bool {
        if !items.sources.isEmpty || !items.ports.isEmpty { return false }
        return isEmptyNow(items)
    }

    private func isEmptyNow(_ items: ModeItems) -> Bool {
        !items.hasSourcesOrTimers && !hasPendingPerformRequests(for: items.mode) && !mainQueueHasWork(in: items)
    }
}
