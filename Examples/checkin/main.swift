// Listings 3-12 to 3-15 of the guide: the main thread creates a local port and launches
// worker threads, passing the port object; each worker creates its own port, installs it
// on its run loop and checks in (message 100) with that port; the main thread stores each
// worker's port, sends each a job, collects the results and stops the workers.
import ArgumentParser
import Dispatch
import Foundation
import RunLoopKit

let checkinMessage: Int32 = 100 // kCheckinMessage
let jobMessage: Int32 = 1
let resultMessage: Int32 = 2
let exitMessage: Int32 = 3

/// The worker thread's object (Listings 3-14 and 3-15). Lives on its worker thread.
final class Worker {
    let index: Int
    var remotePort: RemotePort?
    var port: LocalPort?
    var shouldExit = false

    init(index: Int) { self.index = index }

    /// Listing 3-14: the worker thread's entry point.
    static func launchThread(with distantPort: LocalPort, index: Int, exited: DispatchSemaphore) {
        let worker = Worker(index: index)
        do {
            try worker.sendCheckinMessage(to: distantPort.remote)
        } catch {
            print("worker \(index): check-in failed: \(error)")
            exited.signal()
            return
        }
        // Let the run loop process things.
        repeat {
            ThreadRunLoop.current.run(mode: .default, before: .distantFuture)
        } while !worker.shouldExit
        print("worker \(index): exiting")
        exited.signal()
    }

    /// Listing 3-15: set up this thread's port and send the check-in message.
    func sendCheckinMessage(to outPort: RemotePort) throws {
        remotePort = outPort
        let myPort = try LocalPort { [unowned self] message in self.handlePortMessage(message) }
        ThreadRunLoop.current.add(myPort, to: .default)
        port = myPort
        try outPort.send(LoopMessage(id: checkinMessage, replyPort: myPort.remote), timeout: .seconds(5))
        print("worker \(index): checked in")
    }

    private func handlePortMessage(_ message: LoopMessage) -> LoopMessage? {
        switch message.id {
        case jobMessage:
            let job = message.text ?? ""
            print("worker \(index): job '\(job)'")
            try? remotePort?.send(LoopMessage(id: resultMessage, text: "\(job) done by worker \(index)"))
        case exitMessage:
            shouldExit = true
            port?.invalidate()
        default:
            break
        }
        return nil
    }
}

struct Checkin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "checkin", abstract: "The guide's check-in protocol between the main thread and its workers.")

    @Option(help: "How many worker threads to launch.")
    var workers = 4

    func run() throws {
        let loop = ThreadRunLoop.current
        var workerPorts: [RemotePort] = []
        var results: [String] = []

        // Listing 3-12: create the port, install it, launch the threads with it.
        // Listing 3-13: handle the workers' check-ins and results.
        let myPort = try LocalPort { message in
            switch message.id {
            case checkinMessage:
                if let distantPort = message.replyPort {
                    workerPorts.append(distantPort)
                    print("main: worker port stored (\(workerPorts.count)/\(self.workers))")
                }
            case resultMessage:
                results.append(message.text ?? "")
                print("main: result '\(message.text ?? "")'")
            default:
                break
            }
            return nil
        }
        loop.add(myPort, to: .default)

        let exited = DispatchSemaphore(value: 0)
        for index in 0..<workers {
            let thread = Thread { Worker.launchThread(with: myPort, index: index, exited: exited) }
            thread.start()
        }

        let deadline = Deadline.after(.seconds(20))
        func runUntil(_ condition: () -> Bool) -> Bool {
            while !condition() && Deadline.now() < deadline {
                loop.run(mode: .default, before: deadline)
            }
            return condition()
        }

        let allCheckedIn = runUntil { workerPorts.count == workers }
        for (index, port) in workerPorts.enumerated() {
            do {
                try port.send(LoopMessage(id: jobMessage, text: "job \(index)"))
            } catch {
                print("main: could not send job \(index): \(error)")
            }
        }
        let allResults = runUntil { results.count == workers }
        for port in workerPorts { try? port.send(LoopMessage(id: exitMessage)) }
        var joined = 0
        for _ in 0..<workers where exited.wait(timeout: .now() + 10) == .success { joined += 1 }
        myPort.invalidate()

        print("checked in \(workerPorts.count)/\(workers) workers, \(results.count)/\(workers) results, "
            + "\(joined)/\(workers) stopped")
        guard allCheckedIn, allResults, joined == workers else { throw ExitCode.failure }
    }
}

Checkin.main()
