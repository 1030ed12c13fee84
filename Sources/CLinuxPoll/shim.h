// Linux readiness and wake-up primitives that Glibc's Swift module does not
// export: epoll (the poll set), eventfd and futex (wakeUp) and timerfd (timer deadlines).
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/// The kernel thread id of the calling thread (`gettid` needs _GNU_SOURCE, which
/// Swift's Glibc module does not set).
static inline pid_t clinux_gettid(void) { return (pid_t)syscall(SYS_gettid); }

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
