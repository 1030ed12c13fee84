// runloopkit-bench: RunLoopKit measured beside raw libzmq, Foundation's run loop on Linux
// and the machine's own floors, in one process and run (docs/benchmarks.md).
BenchCommand.main()
