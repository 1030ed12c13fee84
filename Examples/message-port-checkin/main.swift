// Listings 3-16 to 3-19 of the guide: the check-in over named message ports. The main
// thread registers a name and passes the name (not the port) to each worker; each worker
// looks the main port up by name, registers a port of its own under its own name, and
// checks in with that name as data; the main thread looks each worker's port up by name.
import ArgumentParser
import Dispatch
import Foundation
import Glibc
import RunLoopKit

let checkinMessage: Int32 = 100
let jobMessage: Int32 = 1
let resultMessage: Int32 = 2
let exitMessage: Int32 = 3

/// Listing 3-19: the worker thread's entry point, given the main port's name.
func serverThreadEntryPoint(mainPortName: String, index: Int, exited: DispatchSemaphore) {
    defer { exited.signal() }
    do {
        // Create the remote port to the main thread.
        let mainThreadPort = try RemotePort(named: mainPortName)
        // Create a port for the worker thread, under a name of its own.
        let myPortName = "com.runloopkit.example.Thread-\(getpid())-\(index)"
        var shouldExit = false
        let myPort = try LocalPort(name: myPortName) { message in
            switch message.id {
            case jobMessage:
                let job = message.text ?? ""
                print("worker \(index): job '\(job)'")
                try? mainThreadPort.send(LoopMessage(id: resultMessage, text: "\(job) done by \(myPortName)"))
            case exitMessage:
                shouldExit = true
            default:
                break
            }
            return nil
        }
        ThreadRunLoop.current.add(myPort, to: .default)
        // Package up the port name and send the check-in message.
        try mainThreadPort.send(LoopMessage(id: checkinMessage, text: myPortName))
        print("worker \(index): registered '\(myPortName)' and checked in")
        repeat {
            ThreadRunLoop.current.run(mode: .default, before: .distantFuture)
        } while !shouldExit
        myPort.invalidate()
    } catch {
        print("worker \(index): \(error)")
    }
}

struct MessagePortCheckin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "message-port-checkin", abstract: "The check-in protocol over named message ports.")

    @Option(help: "How many worker threads to launch.")
    var workers = 4

    func run() throws {
        let loop = ThreadRunLoop.current
        var workerPorts: [String: RemotePort] = [:]
        var results: [String] = []

        // Listing 3-17: create a named local port for the workers' responses.
        let myPortName = "com.runloopkit.example.MainThread-\(getpid())"
        // Listing 3-18: the main thread's handler looks each worker's port up by name.
        let myPort = try LocalPort(name: myPortName) { message in
            switch message.id {
            case checkinMessage:
                guard let threadPortName = message.text else { break }
                do {
                    workerPorts[threadPortName] = try RemotePort(named: threadPortName)
                    print("main: found '\(threadPortName)' by name (\(workerPorts.count)/\(self.workers))")
                } catch {
                    print("main: cannot look up '\(threadPortName)': \(error)")
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
        print("main: registered '\(myPortName)'")

        let exited = DispatchSemaphore(value: 0)
        for index in 0..<workers {
            Thread { serverThreadEntryPoint(mainPortName: myPortName, index: index, exited: exited) }.start()
        }

        let deadline = Deadline.after(.seconds(20))
        func runUntil(_ condition: () -> Bool) -> Bool {
            while !condition() && Deadline.now() < deadline { loop.run(mode: .default, before: deadline) }
            return condition()
        }
        let allCheckedIn = runUntil { workerPorts.count == workers }
        for (name, port) in workerPorts.sorted(by: { $0.key < $1.key }) {
            try? port.send(LoopMessage(id: jobMessage, text: "job for \(name)"))
        }
        let allResults = runUntil { results.count == workers }
        for port in workerPorts.values { try? port.send(LoopMessage(id: exitMessage)) }
        var joined = 0
        for _ in 0..<workers where exited.wait(timeout: .now() + 10) == .success { joined += 1 }
        myPort.invalidate()

        print("checked in \(workerPorts.count)/\(workers) workers, \(results.count)/\(workers) results, "
            + "\(joined)/\(workers) stopped")
        guard allCheckedIn, allResults, joined == workers else { throw ExitCode.failure }
    }
}

MessagePortCheckin.main()
