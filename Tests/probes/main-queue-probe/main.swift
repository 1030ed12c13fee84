// A probe for MainQueueTests: what becomes of the main thread, the main queue and the main
// loop in a program whose `main` is `async`, or that calls `dispatchMain()`. Each mode
// prints `key=value` lines and exits 0; the tests read them.
//
//   async-main          awaits, as any async main does, and reports where code runs
//   async-main-handoff  hands the main thread to the main loop before its first await
//   dispatch-main       calls dispatchMain(), as a Dispatch-based tool does
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
}
