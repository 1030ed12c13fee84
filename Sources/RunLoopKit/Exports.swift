// What `import RunLoopKit` gives: the library's own types (ports, workers, Swift
// concurrency, introspection) and the public types of the layers below it — the run
// loop itself (`RunLoopCore`) and the system types its API speaks in (`RunLoopSystem`:
// `Deadline`, `UnixSignal`, `SystemCallError`). See docs/architecture.md.
@_exported import RunLoopCore
@_exported import RunLoopSystem
