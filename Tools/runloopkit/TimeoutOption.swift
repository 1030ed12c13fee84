import ArgumentParser

/// How long to wait for a port to take a message and, for requests, to reply.
struct TimeoutOption: ParsableArguments {
    @Option(help: ArgumentHelp("Seconds to wait for the port to take each message, and for each reply.",
                               valueName: "seconds"))
    var timeout: Double = 5

    func validate() throws {
        guard timeout > 0, timeout <= 86_400 else {
            throw ValidationError("--timeout must be a positive number of seconds, at most a day")
        }
    }

    var duration: Duration { .nanoseconds(Int64(timeout * 1e9)) }
}
