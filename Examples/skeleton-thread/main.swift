// Listing 3-2 of the guide: a worker thread's main routine runs its run loop in a
// do/while, reading each run's result and exiting when stopped or finished.
import ArgumentParser
import Dispatch
import Foundation
import RunLoopKit

struct SkeletonThread: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "skeleton-thread",
                                                    abstract: "A worker that runs its loop until stopped.")

    @Option(help: "How many signals the main thread sends before stopping the worker.")
    var signals = 5

    func run() throws {
        let handled = DispatchSemaphore(value: 0)
        let exited = DispatchSemaphore(value: 0)
        let workerLoop = LockedBox<ThreadRunLoop>()
        let workerSource = LockedBox<InputSource>()
        let results = LockedBox<[RunResult]>()

        let worker = Thread {
            // Add your sources or timers to the run loop and do any other setup.
            let loop = ThreadRunLoop.current
            let source = InputSource { handled.signal() }
            loop.add(source, to: .default)
            workerSource.set(source)
            workerLoop.set(loop)

            var done = false
            var seen: [RunResult] = []
            repeat {
                // Start the run loop but return after each source is handled.
                let result = loop.run(mode: .default, timeout: .seconds(10), returnAfterSourceHandled: true)
                print("worker: run returned \(result)")
                seen.append(result)
                // If a source explicitly stopped the run loop, or if there are no
                // sources or timers, go ahead and exit.
                if result == .stopped || result == .finished { done = true }
            } while !done
            results.set(seen)
            exited.signal()
        }
        worker.start()

        let loop = workerLoop.wait()
        let source = workerSource.wait()
        for index in 1...signals {
            print("main: signal \(index)")
            source.signal()
            loop.wakeUp()
            guard handled.wait(timeout: .now() + 10) == .success else { throw ExitCode.failure }
        }
        print("main: stop")
        loop.stop()
        guard exited.wait(timeout: .now() + 10) == .success else { throw ExitCode.failure }

        let seen = results.wait()
        let expected = Array(repeating: RunResult.handledSource, count: signals) + [.stopped]
        print("worker results: \(seen.map(\.description).joined(separator: ", "))")
        guard seen == expected else { throw ExitCode.failure }
    }
}

/// A value handed from one thread to another once.
final class LockedBox<Value>: @unchecked Sendable {
    private let condition = NSCondition()
    private var value: Value? // protected by condition

    func set(_ newValue: Value) {
        condition.lock()
        value = newValue
        condition.broadcast()
        condition.unlock()
    }

    func wait() -> Value {
        condition.lock()
        defer { condition.unlock() }
        while value == nil { condition.wait() }
        return value!
    }
}

SkeletonThread.main()
