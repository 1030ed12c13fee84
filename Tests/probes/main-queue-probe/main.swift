// A probe for MainQueueTests: what becomes of the main thread, the main queue and the main
// loop in a program whose `main` is `async`, or that calls `dispatchMain()`. Each mode
// prints `key=value` lines and exits 0; the tests read them.
//
//   async-main          awaits, as any async main does, and reports where code runs
//   async-main-handoff  hands the main thread to the main loop before its first await
//   dispatch-main       calls dispatchMain(), as a Dispatch-based tool does
//   request-then-run    makes a blocking request, then runs the main loop's default mode once
//   queued-then-run     queues main-queue work, then runs the main loop's default mode once
import Dispatch
import Glibc
import RunLoopKit

@MainActor var mainActorCounter = 0 // @MainActor state, touched only on the main actor

@main
struct MainQueueProbe {
    static var onMainThread: Bool { ThreadRunLoop.main.isOwnerThread }

    static func main() async {
        let mode = CommandLine.arguments.dropFirst().first ?? ""
        print("body-starts-on-main-thread=\(onMainThread)")
        switch mode {
        case "async-main": await asyncMain()
        case "async-main-handoff": handOff()
        case "dispatch-main": callDispatchMain()
        case "request-then-run": requestThenRun()
        case "queued-then-run": queuedThenRun()
        default:
            print("unknown mode '\(mode)'")
            exit(2)
        }
    }

    /// What an async main gets: after its first suspension, the main thread sits in
    /// `dispatchMain()` and `@MainActor` code runs on Dispatch's threads.
    static func asyncMain() async {
        try? await Task.sleep(for: .milliseconds(1))
        print("after-await-on-main-thread=\(onMainThread)")
        let mainActorOnMainThread = await MainActor.run { onMainThread }
        print("main-actor-on-main-thread=\(mainActorOnMainThread)")
        // A perform for the main loop is queued but never runs: nothing runs that loop.
        let request = MainLoop.perform { print("main-loop-perform-ran=true") }
        try? await Task.sleep(for: .milliseconds(200))
        print("main-loop-perform-state=\(request.state)")
        exit(0)
    }

    /// The way out: before its first `await`, still on the main thread, the program runs
    /// the main loop with its async work as the body.
    static func handOff() {
        let worker = try! WorkerThread(name: "probe-worker")
        try! MainLoop.run {
            let fromWorker = try await worker.submit { 20 }
            mainActorCounter += fromWorker + 1
            print("body-after-await-on-main-thread=\(onMainThread)")
            await withCheckedContinuation { continuation in
                DispatchQueue.main.async {
                    print("main-queue-on-main-thread=\(onMainThread)")
                    continuation.resume()
                }
            }
            print("main-actor-counter=\(mainActorCounter)")
        }
        worker.stop()
        print("main-loop-returned=true")
        exit(0)
    }

    /// `dispatchMain()` ends the main thread: main-queue work runs on Dispatch's threads,
    /// and the main loop never runs again.
    static func callDispatchMain() {
        let request = MainLoop.perform { print("main-loop-perform-ran=true") }
        DispatchQueue.main.async {
            print("main-queue-on-main-thread=\(onMainThread)")
            DispatchQueue.main.asyncAfter(deadline: .now() + .milliseconds(200)) {
                print("main-loop-perform-state=\(request.state)")
                exit(0)
            }
        }
        dispatchMain()
    }

    /// The main loop's first run in a common mode, after a blocking request (which ran the
    /// loop in its private reply mode): nothing of the user's is handled, so a run that
    /// returns after a handled source times out.
    static func requestThenRun() {
        let server = try! WorkerThread(name: "probe-server")
        let port = try! server.performAndWait { () throws -> RemotePort in
            let port = try LocalPort { request in LoopMessage(id: request.id) }
            ThreadRunLoop.current.add(port, to: .default)
            return port.remote
        }
        _ = try! port.sendRequest(LoopMessage(id: 1))
        print("run-result=\(runDefaultModeOnce())")
        server.stop()
        exit(0)
    }

    /// Main-queue work queued before the main loop ever ran in a common mode runs in its
    /// first run, as a handled source.
    static func queuedThenRun() {
        DispatchQueue.main.async { print("queued-work-ran=true") }
        print("run-result=\(runDefaultModeOnce())")
        exit(0)
    }

    /// One run of the main loop's default mode, kept from being empty by a source nobody
    /// signals, that returns after a handled source or 300 ms.
    static func runDefaultModeOnce() -> RunResult {
        let loop = ThreadRunLoop.main
        let keepAlive = InputSource {}
        loop.add(keepAlive, to: .default)
        defer { keepAlive.invalidate() }
        return loop.run(mode: .default, timeout: .milliseconds(300), returnAfterSourceHandled: true)
    }
}
