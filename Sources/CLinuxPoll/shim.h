// Linux readiness and wake-up primitives that Glibc's Swift module does not
// export: epoll (the poll set), eventfd and futex (wakeUp), timerfd (timer deadlines),
// pidfd and waitid (child-process sources), and libdispatch's main-queue hooks.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/// The kernel thread id of the calling thread (`gettid` needs _GNU_SOURCE, which
/// Swift's Glibc module does not set).
static inline pid_t clinux_gettid(void) { return (pid_t)syscall(SYS_gettid); }

#include <linux/time_types.h>
#include <stdint.h>
/// The number of `epoll_pwait2`: 441 on x86_64, aarch64 and every architecture with the
/// generic system call table, where the headers are too old to name it.
static inline long clinux_epoll_pwait2_number(void) {
#ifdef SYS_epoll_pwait2
    return SYS_epoll_pwait2;
#else
    return 441;
#endif
}

/// `epoll_pwait2` (Linux 5.11) through `syscall(2)`, so that the package links against a
/// glibc older than 2.35, which has no wrapper: waits at most `timeout_ns` nanoseconds
/// (negative: no timeout), with no signal mask. Returns the number of ready events, or -1
/// with errno set (ENOSYS where the kernel lacks the call).
static inline int clinux_epoll_pwait2(int epfd, struct epoll_event *events, int maxevents, int64_t timeout_ns) {
    struct __kernel_timespec timeout;
    struct __kernel_timespec *timeout_pointer = NULL;
    if (timeout_ns >= 0) {
        timeout.tv_sec = timeout_ns / 1000000000;
        timeout.tv_nsec = timeout_ns % 1000000000;
        timeout_pointer = &timeout;
    }
    return (int)syscall(clinux_epoll_pwait2_number(), epfd, events, maxevents, timeout_pointer, NULL, 0);
}

#include <fcntl.h>
/// Open-file-description locks (F_OFD_SETLK / F_OFD_GETLK), which glibc hides behind
/// _GNU_SOURCE: held per open file, released by the kernel when the holder dies, and
/// testable without taking them. Returns 0 on success, -1 with errno set.
static inline int clinux_ofd_lock(int fd, int exclusive, int test_only, int *held_by_other) {
    struct flock lock = { 0 };
    lock.l_type = exclusive ? F_WRLCK : F_RDLCK;
    lock.l_whence = SEEK_SET;
    int rc = fcntl(fd, test_only ? 36 /* F_OFD_GETLK */ : 37 /* F_OFD_SETLK */, &lock);
    if (rc == 0 && test_only && held_by_other) *held_by_other = (lock.l_type != F_UNLCK);
    return rc;
}

#include <pthread.h>
/// Names the calling thread (`pthread_setname_np`, which glibc also hides behind
/// _GNU_SOURCE). Linux takes at most 15 bytes plus the NUL; longer names fail with ERANGE.
static inline int clinux_set_thread_name(const char *name) {
    extern int pthread_setname_np(pthread_t thread, const char *name);
    return pthread_setname_np(pthread_self(), name);
}

#include <sys/prctl.h>
/// Sets the calling thread's timer slack (`prctl(PR_SET_TIMERSLACK)`, variadic in C), the
/// time the kernel may add to its timed sleeps to batch wake-ups; Linux's default is 50 µs.
static inline int clinux_set_timer_slack(unsigned long nanoseconds) {
    return prctl(PR_SET_TIMERSLACK, nanoseconds, 0, 0, 0);
}

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
/// For tests of fallbacks only: makes system call `nr` fail with `errno_value` on the
/// calling thread and the threads it creates from now on, as on a kernel without the call
/// (a seccomp filter, after `PR_SET_NO_NEW_PRIVS`; irreversible). Returns 0, or -1 with
/// errno set where seccomp is not available.
static inline int clinux_deny_system_call_for_tests(long nr, int errno_value) {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned int)nr, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned int)errno_value & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = { .len = (unsigned short)(sizeof filter / sizeof filter[0]), .filter = filter };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program);
}

#include <linux/futex.h>
#include <stdint.h>
#include <time.h>
/// Sleeps while `*word == expected` (`FUTEX_WAIT_BITSET`, process-private), until woken,
/// or until `deadline_ns` on CLOCK_MONOTONIC (absolute nanoseconds; UINT64_MAX: no
/// deadline). Returns 0 when woken (maybe spuriously), -1 with errno ETIMEDOUT, EAGAIN
/// (the word no longer held `expected`) or EINTR.
static inline int clinux_futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline_ns) {
    struct timespec deadline;
    struct timespec *timeout = NULL;
    if (deadline_ns != UINT64_MAX) {
        deadline.tv_sec = (time_t)(deadline_ns / 1000000000u);
        deadline.tv_nsec = (long)(deadline_ns % 1000000000u);
        timeout = &deadline;
    }
    return (int)syscall(SYS_futex, word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected, timeout, NULL,
                        FUTEX_BITSET_MATCH_ANY);
}

/// Wakes one thread sleeping in `clinux_futex_wait` on `word`. Returns how many woke.
static inline int clinux_futex_wake(uint32_t *word) {
    return (int)syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
}

#include <signal.h>
#include <sys/wait.h>
/// Opens a descriptor that refers to process `pid` and becomes readable when it exits
/// (`pidfd_open`, Linux 5.3; glibc 2.36's wrapper is not in every sysroot). -1 with errno
/// ENOSYS where the kernel lacks it.
static inline int clinux_pidfd_open(pid_t pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    return (int)syscall(434, pid, 0);
#endif
}

/// `waitid` for the child a pidfd refers to (`P_PIDFD`, Linux 5.4), without blocking.
/// Returns 0 and fills `info` (si_pid 0 if it has not exited), -1 with errno set.
static inline int clinux_waitid_pidfd(int pidfd, siginfo_t *info) {
    return waitid((idtype_t)3 /* P_PIDFD */, (id_t)pidfd, info, WEXITED | WNOHANG);
}

/// `waitid` for child `pid`, without blocking: the fallback where pidfds are missing.
static inline int clinux_waitid_pid(pid_t pid, siginfo_t *info) {
    return waitid(P_PID, (id_t)pid, info, WEXITED | WNOHANG);
}

/// The pid and the status of a `siginfo_t` that `waitid` filled (its union's fields).
static inline pid_t clinux_siginfo_pid(const siginfo_t *info) { return info->si_pid; }
static inline int clinux_siginfo_code(const siginfo_t *info) { return info->si_code; }
static inline int clinux_siginfo_status(const siginfo_t *info) { return info->si_status; }

// libdispatch's hooks for a run loop that services the main queue, exported by
// libdispatch.so for Core Foundation's run loop and used by it on Linux: the main
// queue's eventfd, written whenever work is queued to it, and the call that drains the
// queue on the main thread.
extern int _dispatch_get_main_queue_handle_4CF(void);
extern void _dispatch_main_queue_callback_4CF(void *_Nullable msg);
