import Dispatch
import LatencyStatistics
import Synchronization

// The machine's own floors: a semaphore ping-pong between two threads, `DispatchQueue.async`
// with a semaphore for the answer, and plain threads.

/// Two threads handing a turn back and forth with two semaphores: the floor of a
/// cross-thread wake-up and back (`semaphore` in `port-pingpong-threads`).
final class SemaphorePingPong: LatencyContender {
    let name = "semaphore"
    private let ping = DispatchSemaphore(value: 0)
    private let pong = DispatchSemaphore(value: 0)
    private let quit = SharedCounter()
    private let driver = CommandThread()
    private var echo: JoinableThread?

    init() {
        let (ping, pong, quit) = (ping, pong, quit)
        echo = JoinableThread.start(cpu: Placement.pair) {
            while true {
                ping.wait()
                if quit.load() != 0 { return }
                pong.signal()
            }
        }
    }

    func measure(_ count: Int) -> LatencyHistogram {
        let (ping, pong) = (ping, pong)
        return driver.run {
            var recorder = LatencyHistogram()
            for _ in 0..<count {
                let start = Clock.now()
                ping.signal()
                pong.wait()
                recorder.record(nanoseconds: Clock.now() &- start)
            }
            return recorder
        }
    }

    func finish() {
        quit.store(1)
        ping.signal()
        echo?.join()
        driver.finish()
    }
}

/// A closure run on a serial `DispatchQueue`, its answer awaited on a semaphore.
final class DispatchAsyncRoundTrip: LatencyContender {
    let name = "dispatch-async"
    private let queue = DispatchQueue(label: "runloopkit-bench.dispatch")
    private let driver = CommandThread()

    func measure(_ count: Int) -> LatencyHistogram {
        let queue = queue
        return driver.run { postedRoundTrips(count) { queue.async(execute: $0) } }
    }

    func finish() { driver.finish() }
}

/// `count` round trips of a closure that `post` hands to another thread, which computes
/// an answer and signals a semaphore the calling thread waits on; each answer is checked.
func postedRoundTrips(_ count: Int, post: (@escaping @Sendable () -> Void) -> Void) -> LatencyHistogram {
    var recorder = LatencyHistogram()
    let answered = DispatchSemaphore(value: 0)
    let answer = SharedCounter()
    for index in 0..<count {
        let start = Clock.now()
        post {
            answer.store(index &* 2)
            answered.signal()
        }
        answered.wait()
        recorder.record(nanoseconds: Clock.now() &- start)
        precondition(answer.load() == index &* 2)
    }
    return recorder
}

enum PlainThreads {
    /// Starts `count` threads that each signal a semaphore and then wait to be released;
    /// returns the seconds until all had signalled (then releases and joins them).
    static func startAll(_ count: Int) -> Double {
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let start = Clock.now()
        var threads: [JoinableThread] = []
        threads.reserveCapacity(count)
        for _ in 0..<count {
            threads.append(JoinableThread.start {
                started.signal()
                release.wait()
            })
        }
        for _ in 0..<count { started.wait() }
        let seconds = Clock.seconds(since: start)
        for _ in 0..<count { release.signal() }
        for thread in threads { thread.join() }
        return seconds
    }

    /// `count` cycles of creating a thread (with an empty body) and joining it; cycles per second.
    static func cycles(_ count: Int) -> Double {
        let start = Clock.now()
        for _ in 0..<count { JoinableThread.start {}.join() }
        return Double(count) / Clock.seconds(since: start)
    }
}
