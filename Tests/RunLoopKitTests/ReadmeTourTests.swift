import Foundation // the tour's names must not collide with Foundation's
import RunLoopKit
import XCTest

/// The README's tour, kept compiling and true.
final class ReadmeTourTests: XCTestCase {
    func testTheReadmeTourCompilesAndBehavesAsDescribed() {
        let log = EventLog()
        @Sendable func print(_ item: Any) { log.append("\(item)") }

        let loop = ThreadRunLoop.current              // this thread's loop, created on first use

        // A timer on a 100 ms grid, first firing 300 ms from now, allowed to be 5 ms late.
        let timer = LoopTimer(after: .milliseconds(300), repeating: .milliseconds(100),
                              tolerance: .milliseconds(5)) { timer in print("tick") }
        loop.add(timer, to: .default)

        // An observer of every activity of the pass.
        loop.add(LoopObserver(activities: .all) { _, activity in print(activity) }, to: .default)

        // A custom input source: signalled from any thread, performed on this one.
        let source = InputSource(schedule: { loop, mode in print("scheduled in \(mode)") },
                                 cancel: { loop, mode in print("cancelled in \(mode)") }) {
            print("performed")
        }
        loop.add(source, to: .common)                 // every common mode, present and future

        // From another thread: signal the source and wake the loop, or run a closure there.
        source.signal(); loop.wakeUp()
        loop.perform { print("runs on the loop's thread") }

        // Run as CFRunLoopRunInMode does, and read why it returned.
        let result = loop.run(mode: .default, timeout: .seconds(1), returnAfterSourceHandled: true)
        // .finished, .stopped, .timedOut or .handledSource

        let printed = log.all
        XCTAssertEqual(result, .handledSource)
        XCTAssertEqual(printed, ["scheduled in default", "entry", "beforeTimers", "beforeSources",
                                 "runs on the loop's thread", "performed", "exit"])
        XCTAssertFalse(printed.contains("tick"), "the timer is not due yet")
        XCTAssertTrue(timer.isValid)
        // Foundation's names stay usable alongside.
        XCTAssertNotNil(RunLoop.current)
        _ = Timer(timeInterval: 1, repeats: false) { _ in }
        timer.invalidate()
        source.invalidate()
        XCTAssertEqual(log.all.last, "cancelled in default")
    }
}
