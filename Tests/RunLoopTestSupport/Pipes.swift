import Glibc

/// `pipe2(O_NONBLOCK | O_CLOEXEC)` (glibc hides `pipe2` behind _GNU_SOURCE): 0 or -1.
package func nonBlockingPipe(_ fds: inout [Int32]) -> Int32 {
    guard pipe(&fds) == 0 else { return -1 }
    for fd in fds {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }
    return 0
}
