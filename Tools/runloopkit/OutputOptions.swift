import ArgumentParser

/// The `--json` flag every command takes.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print one JSON object on stdout, for scripts.")
    var json = false
}
