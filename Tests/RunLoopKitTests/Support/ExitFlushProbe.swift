@testable import RunLoopKit
import RunLoopTestSupport

/// `exit-flush-probe` (`Tests/probes/exit-flush-probe`) started with `arguments`, sharing
/// this process's runtime directory, its output read as it comes.
func startExitFlushProbe(_ arguments: [String]) throws -> SpawnedProcess {
    try SpawnedProcess([try builtExecutable("exit-flush-probe")] + arguments,
                       environment: ["RUNLOOPKIT_RUNTIME_DIR": try RuntimeDirectory.path()])
}
