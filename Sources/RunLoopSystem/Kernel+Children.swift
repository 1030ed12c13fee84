import CLinuxPoll
import Glibc

/// A child process's end, as `waitid(2)` reports it (`siginfo_t`'s `si_pid`, `si_code`
/// and `si_status`): how it ended (`CLD_EXITED`, `CLD_KILLED`, `CLD_DUMPED`) and its exit
/// status or the signal that ended it.
package struct EndedChild: Sendable, Equatable {
    package let pid: pid_t
    package let code: Int32
    package let status: Int32
}

/// Collecting a child's end without blocking (`waitid(2)`, `WEXITED | WNOHANG`), each
/// call through `systemCall`: the child is reaped.
extension Kernel {
    /// The end of the child a pidfd refers to (`P_PIDFD`, Linux 5.4); nil while it runs.
    package static func collectChild(pidfd: Int32) throws(SystemCallError) -> EndedChild? {
        var info = siginfo_t()
        try systemCall("waitid(P_PIDFD)") { clinux_waitid_pidfd(pidfd, &info) }
        return ended(info) // a zero pid: it has not ended
    }

    /// The end of child `pid` (`P_PID`: where pidfds are missing); nil while it runs.
    package static func collectChild(pid: pid_t) throws(SystemCallError) -> EndedChild? {
        var info = siginfo_t()
        try systemCall("waitid(P_PID)") { clinux_waitid_pid(pid, &info) }
        return ended(info)
    }

    private static func ended(_ info: siginfo_t) -> EndedChild? {
        var info = info
        let pid = clinux_siginfo_pid(&info)
        guard pid != 0 else { return nil }
        return EndedChild(pid: pid, code: clinux_siginfo_code(&info), status: clinux_siginfo_status(&info))
    }
}
