// Listings 3-3 to 3-9 of the guide: a custom input source with a command buffer on a
// worker thread. Its schedule callback registers it with the main thread, the main thread
// posts commands and fires them (signal + wake up), the worker performs them, and the
// cancel callback unregisters the source when it is invalidated.
import Dispatch
import Foundation
import RunLoopKit

/// Listing 3-3: the input source object, which owns a command buffer that any thread may fill.
final class CommandSource: @unchecked Sendable {
    private let lock = NSLock()
    private var commands: [(Int, String)] = [] // protected by lock
    private(set) var source: InputSource! // set once in init
    let app: App

    init(app: App) {
        self.app = app
        source = InputSource(
            schedule: { [unowned self] loop, _ in self.scheduled(on: loop) }, //   Listing 3-4
            cancel: { [unowned self] loop, _ in self.cancelled(on: loop) } //      Listing 3-6
        ) { [unowned self] in self.sourceFired() } //                               Listing 3-5
    }

    /// Listing 3-7: installing the source on the current thread's run loop.
    func addToCurrentRunLoop() { ThreadRunLoop.current.add(source, to: .default) }

    func invalidate() { source.invalidate() }

    /// Listing 3-4: the schedule routine tells the main thread how to reach the source.
    private func scheduled(on loop: ThreadRunLoop) {
        let context = RunLoopContext(source: self, loop: loop)
        ThreadRunLoop.main.perform { [app] in app.registerSource(context) }
    }

    /// Listing 3-6: the cancel routine unregisters the source, waiting until that is done.
    private func cancelled(on loop: ThreadRunLoop) {
        let context = RunLoopContext(source: self, loop: loop)
        try? ThreadRunLoop.main.performAndWait { [app] in app.removeSource(context) }
    }

    /// Listing 3-5: the perform routine processes every buffered command.
    private func sourceFired() {
        lock.lock()
        let batch = commands
        commands.removeAll()
        lock.unlock()
        for (command, data) in batch {
            print("worker: performing command \(command) (\(data))")
            ThreadRunLoop.main.perform { [app] in app.commandPerformed(command) }
        }
    }

    /// The client interface for registering commands to process.
    func addCommand(_ command: Int, data: String) {
        lock.lock()
        commands.append((command, data))
        lock.unlock()
    }

    /// Listing 3-9: signal the source, then wake its run loop.
    func fireAllCommands(on loop: ThreadRunLoop) {
        source.signal()
        loop.wakeUp()
    }
}

/// Listing 3-3's RunLoopContext: the source and the loop it is installed on.
struct RunLoopContext: Sendable {
    let source: CommandSource
    let loop: ThreadRunLoop
}

/// Listing 3-8: the main thread's registry of sources to ping. Main thread only.
final class App: @unchecked Sendable {
    var sourcesToPing: [RunLoopContext] = []
    var performed: [Int] = []
    var everRegistered = false

    func registerSource(_ context: RunLoopContext) {
        print("main: source registered")
        sourcesToPing.append(context)
        everRegistered = true
    }

    func removeSource(_ context: RunLoopContext) {
        print("main: source removed")
        sourcesToPing.removeAll { $0.source === context.source }
    }

    func commandPerformed(_ command: Int) { performed.append(command) }
}

let app = App()
let mainLoop = ThreadRunLoop.current
let keepAlive = InputSource {} // the main loop's own source, as an application has
mainLoop.add(keepAlive, to: .default)

/// Runs the main loop until `condition` holds (or 10 s pass, a safety net).
func runMainLoop(until condition: () -> Bool) -> Bool {
    let limit = Deadline.after(.seconds(10))
    while !condition() {
        guard Deadline.now() < limit else { return false }
        mainLoop.run(mode: .default, before: limit)
    }
    return true
}

let workerExited = DispatchSemaphore(value: 0)
let worker = Thread {
    let source = CommandSource(app: app)
    source.addToCurrentRunLoop()
    ThreadRunLoop.current.run() // returns once the source is invalidated: the mode is empty
    print("worker: run loop finished, thread exiting")
    workerExited.signal()
}
worker.start()

let commands = [1, 2, 3, 4, 5]
var ok = runMainLoop { !app.sourcesToPing.isEmpty }
if ok, let context = app.sourcesToPing.first {
    for command in commands {
        print("main: posting command \(command)")
        context.source.addCommand(command, data: "payload \(command)")
    }
    context.source.fireAllCommands(on: context.loop)
    ok = runMainLoop { app.performed.count == commands.count }
    context.loop.perform { context.source.invalidate() }
    ok = ok && runMainLoop { app.sourcesToPing.isEmpty }
}
ok = ok && workerExited.wait(timeout: .now() + 10) == .success
keepAlive.invalidate()

print("registered: \(app.everRegistered), performed: \(app.performed), unregistered: \(app.sourcesToPing.isEmpty)")
exit(ok && app.everRegistered && app.performed == commands && app.sourcesToPing.isEmpty ? 0 : 1)
