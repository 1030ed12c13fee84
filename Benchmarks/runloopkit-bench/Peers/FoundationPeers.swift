import Dispatch
import Foundation
import LatencyStatistics
import Synchronization

// The Foundation peers, as shipped with the toolchain (swift-corelibs-foundation on
// Linux): `SocketPort` between two run-loop threads, `RunLoop.perform` woken by a
// zero-delay `Timer`, and a repeating `Timer`.

/// A `PortDelegate` calling a closure (the delegate is held weakly by the port).
final class PortHandler: NSObject, PortDelegate {
    let body: (PortMessage) -> Void
    init(_ body: @escaping (PortMessage) -> Void) { self.body = body }
    func handle(_ message: PortMessage) { body(message) }
}

extension SocketPort {
    /// The TCP port number a `SocketPort(tcpPort: 0)` was given.
    var tcpPortNumber: UInt16 {
        var address = sockaddr_in()
        _ = withUnsafeMutableBytes(of: &address) { self.address.copyBytes(to: $0) }
        return UInt16(bigEndian: address.sin_port)
    }
}

/// Ping-pong of a 64-byte component between two threads each running a Foundation
/// `RunLoop` with a `SocketPort` (TCP on 127.0.0.1, the only port that works on Linux).
///
/// On Linux the message's `sendPort` names the port it was sent to, not the sender's
/// (the `from:` argument is not transmitted), so each side holds a remote port to the other.
final class SocketPortPingPong: LatencyContender {
    let name = "foundation-socketport"

    /// The driver side's objects; used on the driver thread only.
    private final class Pinger {
        var port: SocketPort?
        var handler: PortHandler?
        var target: SocketPort?
        var components = NSMutableArray(array: [Data(repeating: 7, count: 64)])
        var remaining = 0
        var sentAt: UInt64 = 0
        var recorder = LatencyHistogram()

        func ping() {
            sentAt = Clock.now()
            guard target!.send(before: .distantFuture, msgid: 1, components: components, from: port, reserved: 0) else {
                fatalError("SocketPort send failed")
            }
        }
    }

    /// The echo side's objects, kept alive as long as its thread.
    private final class Echo {
        var port: SocketPort?
        var handler: PortHandler?
        var back: SocketPort?
    }

    private let driver = CommandThread()
    private let pinger = Confined<Pinger?>(nil)
    private let echo = Confined(Echo())
    private var echoThread: FoundationLoopThread?

    init() {
        let pinger = pinger
        let driverPort: UInt16 = driver.run {
            let state = Pinger()
            let port = SocketPort(tcpPort: 0)!
            let handler = PortHandler { [unowned state] _ in
                let now = Clock.now()
                state.recorder.record(nanoseconds: now &- state.sentAt)
                state.remaining -= 1
                if state.remaining > 0 { state.ping() }
            }
            port.setDelegate(handler)
            port.schedule(in: RunLoop.current, forMode: .default)
            (state.port, state.handler) = (port, handler)
            pinger.value = state
            return port.tcpPortNumber
        }
        let echo = echo
        let thread = FoundationLoopThread {
            let port = SocketPort(tcpPort: 0)!
            let back = SocketPort(remoteWithTCPPort: driverPort, host: "127.0.0.1")!
            let handler = PortHandler { message in
                let components = NSMutableArray(array: message.components ?? [])
                _ = back.send(before: .distantFuture, msgid: 2, components: components, from: port, reserved: 0)
            }
            port.setDelegate(handler)
            port.schedule(in: RunLoop.current, forMode: .default)
            (echo.value.port, echo.value.handler, echo.value.back) = (port, handler, back)
        }
        echoThread = thread
        let echoPort = echo.value.port!.tcpPortNumber
        driver.run { pinger.value!.target = SocketPort(remoteWithTCPPort: echoPort, host: "127.0.0.1")! }
    }

    func measure(_ count: Int) -> LatencyHistogram {
        let pinger = pinger
        return driver.run {
            let state = pinger.value!
            state.recorder = LatencyHistogram()
            state.remaining = count
            state.ping()
            while state.remaining > 0 { _ = RunLoop.current.run(mode: .default, before: .distantFuture) }
            return state.recorder
        }
    }

    func finish() {
        let pinger = pinger
        driver.run {
            pinger.value?.port?.invalidate()
            pinger.value?.target?.invalidate()
            pinger.value = nil
        }
        driver.finish()
        echoThread?.finish()
        echo.value.port?.invalidate()
        echo.value = Echo()
    }
}

/// `RunLoop.perform` on another thread's Foundation run loop, which it does not wake by
/// itself, woken by adding a zero-delay `Timer`; the answer comes back through a semaphore.
final class FoundationPerform: LatencyContender {
    let name = "foundation-perform"
    private let target = FoundationLoopThread {}
    private let driver = CommandThread()

    func measure(_ count: Int) -> LatencyHistogram {
        let runLoop = Confined(target.runLoop)
        return driver.run {
            postedRoundTrips(count) { work in
                runLoop.value.perform(work)
                // `Timer(timeInterval:repeats:)` fires at once on Linux (its fire date is now).
                runLoop.value.add(Timer(timeInterval: 0, repeats: false) { _ in }, forMode: .default)
            }
        }
    }

    func finish() {
        driver.finish()
        target.finish()
    }
}

/// A 1 ms repeating Foundation `Timer` on a thread running its run loop: the lateness of
/// each fire after its grid point (see `TimerLateness`).
final class FoundationTimerLateness: LatencyContender {
    let name = "foundation-timer"
    private let driver = CommandThread(cpu: nil)

    func measure(_ count: Int) -> LatencyHistogram {
        driver.run {
            let tracker = Confined(LatenessTracker(interval: 1_000_000))
            let start = Clock.now()
            let timer = Timer(fire: Date(timeIntervalSinceNow: 0.001), interval: 0.001, repeats: true) { timer in
                tracker.value.fired(at: Clock.now(), firstGridPoint: start + 1_000_000)
                if tracker.value.fires >= count { timer.invalidate() }
            }
            RunLoop.current.add(timer, forMode: .default)
            while timer.isValid { _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 1)) }
            return tracker.value.recorder
        }
    }

    func finish() { driver.finish() }
}
